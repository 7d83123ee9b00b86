package diagnose

import (
	"fmt"
	"strings"
	"testing"
)

// TestCatalogueMatchesTemplates: every entry of the generated catalogue
// parses, names a class with a title and a fix, and its pattern matches its
// own source template with sample values in the placeholders, capturing
// them.
func TestCatalogueMatchesTemplates(t *testing.T) {
	c, err := loadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Entries) == 0 {
		t.Fatal("empty catalogue")
	}
	for _, k := range c.Classes {
		if k.Title == "" || k.Fix == "" || k.Domain == "" {
			t.Errorf("class %s lacks a title, fix or domain", k.ID)
		}
	}
	for _, e := range c.Entries {
		if e.Package == "" || e.Version == "" || e.Source == "" {
			t.Errorf("entry %q lacks its provenance", e.Template)
		}
		n := 0
		var want []string
		sample := sigPlaceholderRE.ReplaceAllStringFunc(e.Template, func(string) string {
			n++
			v := fmt.Sprintf("<V%d>", n)
			want = append(want, v)
			return v
		})
		sample = strings.NewReplacer("{{", "{", "}}", "}").Replace(sample)
		if e.re.NumSubexp() != n || len(e.Captures) != n {
			t.Errorf("%s: %d placeholders, pattern has %d groups, %d capture names", e.Source, n, e.re.NumSubexp(), len(e.Captures))
			continue
		}
		// The pattern against its own source text; Requires is what the
		// line around it must show (TestLayerCatalogue).
		got, ok := e.matchKeys(sample, normSig(sample))
		if !ok {
			t.Errorf("%s: pattern %q does not match its template %q", e.Source, e.Pattern, e.Template)
			continue
		}
		if !strings.Contains(e.Template, "}{") && strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: captured %q, want %q", e.Source, got, want)
		}
	}
}

// TestSignatureNamesClass: real lines of the classes the issue names (#34:
// KV cache, offline hub, driver older than the image's CUDA, NCCL's
// /dev/shm "Last error:", RoCE completion errors) are named by their class
// and the fix written for it.
func TestSignatureNamesClass(t *testing.T) {
	tests := []struct{ name, log, want string }{
		{"kv cache", "(EngineCore_DP0 pid=1) ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n", "kv-cache-too-small"},
		{"offline", "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/Qwen/Qwen3-8B: offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` environment variable.\n", "hf-offline"},
		{"driver", "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a newer version, or use an earlier cuda container: unknown.\n", "driver-too-old"},
		{"cuda 804", "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW\n", "driver-too-old"},
		{"nccl shm", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\nncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\nLast error:\nError while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)\n", "nccl-shm"},
		{"roce", "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.2.0.5<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)\nRuntimeError: NCCL communicator was aborted on rank 1.\n", "nccl-ib"},
		// A message wrapped at a terminal's width: its start names it
		// (SergiioB/intel-arc-pro-b70-inference-cookbook#4).
		{"kv cache wrapped", "(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach\ne is needed, which is larger than the available KV cache memory (4.25 GiB). Based on the avai\n", "kv-cache-too-small"},
		// Cut after its first value: the package's own exception names it
		// (huggingface/optimum-neuron#535).
		{"offline cut", "huggingface_hub.utils._http.OfflineModeIsEnabled: Cannot reach https://huggingface.co/meta-llama/Llama-2-7b-chat-hf/\n", "hf-offline"},
		// A raise of several arguments, printed as Python prints it
		// (vllm-project/vllm#14040).
		{"quantization tuple", "RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 80. ', 'Current capability: 75.')\n", "quantization-unsupported"},
		// A message built in a variable, then raised (vLLM's
		// verify_max_model_len; VectorInstitute/vector-inference#61).
		{"max_model_len", "ValueError: User-specified max_model_len (32768) is greater than the derived max_model_len\n(max_position_embeddings=4096 or model_max_length=None in model's config.json). \n", "max-model-len-too-large"},
		// An input() prompt nobody answered (runpod-workers/worker-vllm#43).
		{"trust prompt", "The repository for TheBloke/Nous-Capybara-34B-AWQ contains custom code which must be executed to correctly load the model. You can inspect the repository content at https://hf.co/TheBloke/Nous-Capybara-34B-AWQ.\nYou can avoid this prompt in future by passing the argument `trust_remote_code=True`.\n\n    answer = input(\nEOFError: EOF when reading a line\n", "trust-remote-code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(Input{Logs: []Log{{Host: "node1", Source: "log", Text: []byte(tt.log)}}})
			if string(d.Cause) != tt.want || !d.Known || d.Fix == "" {
				t.Fatalf("cause %s, want %s:\n%s", d.Cause, tt.want, d.Text())
			}
		})
	}
}

// TestSignatureRelease: of the entries a line matches, the one whose whole
// pattern matches names the release: "The repository for X contains custom
// code" is transformers 4.x's wording (5.x dropped "for").
func TestSignatureRelease(t *testing.T) {
	e, _, ok := signatureOf("The repository for TheBloke/Nous-Capybara-34B-AWQ contains custom code which must be executed to correctly load the model. You can inspect the repository content at https://hf.co/TheBloke/Nous-Capybara-34B-AWQ.")
	if !ok || e.Package != "transformers" || !strings.HasPrefix(e.Version, "4.") {
		t.Fatalf("entry %+v, want transformers 4.x", e)
	}
}

// TestSignatureAnsweredPrompt: an input() prompt a process went on past
// (someone answered it) is no failure.
func TestSignatureAnsweredPrompt(t *testing.T) {
	log := "The repository for .cache/huggingface/hub/models--mlx-community--Phi-3.5-vision-instruct-4bit/snapshots/ae224cfb6cf97e548ed88389d6050f76a3f28278 contains custom code which must be executed to correctly load the model. You can inspect the repository content at .cache/huggingface/hub/models--mlx-community--Phi-3.5-vision-instruct-4bit/snapshots/ae224cfb6cf97e548ed88389d6050f76a3f28278.\n" +
		"You can avoid this prompt in future by passing the argument `trust_remote_code=True`.\n\nDo you wish to run the custom code? [y/N] y\n"
	d := Classify(Input{Logs: []Log{{Host: "mac", Source: "log", Text: []byte(log)}}})
	if d.Failure {
		t.Fatalf("an answered prompt is no failure, got %s:\n%s", d.Cause, d.Text())
	}
}

// TestSignatureLeadNotShared: a message that only starts like a catalogue
// entry is not that entry's class — vLLM 0.32's deprecated-quantization
// refusal (vllm/config/model.py, raised with two arguments, as Python
// prints it) starts as its capability check does. It is quoted as the
// fatal error, with the fix it gives.
func TestSignatureLeadNotShared(t *testing.T) {
	log := "ValueError: ('The quantization method %s is deprecated and will be removed in future versions of vLLM. To bypass, set `--allow-deprecated-quantization`.', 'gptq')\n"
	d := Classify(Input{Logs: []Log{{Host: "gpu1", Source: "log", Text: []byte(log)}}})
	if d.Cause != FatalError || !strings.Contains(d.Fix, "--allow-deprecated-quantization") {
		t.Fatalf("cause %s, want %s with the message's fix:\n%s", d.Cause, FatalError, d.Text())
	}
}
