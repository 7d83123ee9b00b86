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
		got, ok := e.match(sample)
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
