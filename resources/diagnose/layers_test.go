package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sha256RE is a sha256 in hex.
var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestLayerCatalogue: every entry of the layer catalogues carries its
// provenance (package, version, the file it was read from and that file's
// sha256; a closed source says so), its layer and a class of the
// catalogue; every layer class's fix names the layer and its next step.
// TestCatalogueMatchesTemplates checks each pattern against its own text.
func TestLayerCatalogue(t *testing.T) {
	var layers catalogue
	if err := json.Unmarshal(layersJSON, &layers); err != nil {
		t.Fatal(err)
	}
	c, err := loadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range c.Classes {
		known[k.ID] = true
	}
	for _, k := range layers.Classes {
		if k.Layer == "" || !strings.HasPrefix(k.Fix, "Layer: ") || !strings.Contains(k.Fix, "host") {
			t.Errorf("class %s: its fix does not name its layer and the host to run the next step on: %q", k.ID, k.Fix)
		}
	}
	perLayer := map[string]int{}
	for _, e := range layers.Entries {
		perLayer[e.Layer]++
		closed := strings.Contains(e.Source, "closed source")
		if e.Package == "" || e.Version == "" || e.Source == "" || e.Layer == "" || !closed && !sha256RE.MatchString(e.SHA256) {
			t.Errorf("entry %q lacks its provenance: %+v", e.Template, e)
		}
		if !known[e.Class] {
			t.Errorf("entry %q: no class %q", e.Template, e.Class)
		}
	}
	for _, l := range []string{"CUDA runtime", "CUDA driver", "NVML", "NCCL", "dynamic loader", "linker", "weights", "Hugging Face Hub"} {
		if perLayer[l] == 0 {
			t.Errorf("no entry of layer %s", l)
		}
	}
}

// TestLayerClasses: real lines of each layer (from public threads, the
// source in the comment) are named by their layer class, with the reading
// the rest of the log supports.
func TestLayerClasses(t *testing.T) {
	tests := []struct{ name, log, want, reading string }{
		// pytorch/pytorch issues: an illegal address on one rank of two.
		{"kernel fault on one rank", "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n[rank0]: INFO step 10\n", "cuda-kernel-fault", "only [rank1] of the 2 processes"},
		{"kernel fault on every rank", "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n", "cuda-kernel-fault", "every process in the logs"},
		{"busy", "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable\n", "gpu-busy", ""},
		{"fabric manager", "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized\n", "gpu-fabric-not-ready", ""},
		{"nvml mismatch", "Failed to initialize NVML: Driver/library version mismatch\n", "driver-library-mismatch", ""},
		{"pynvml", "pynvml.NVMLError_GpuIsLost: GPU is lost\n", "gpu-hardware-fault", ""},
		{"nccl remote", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or there was a network error, NCCL version 2.21.5\n", "nccl-remote-error", ""},
		// Dao-AILab/flash-attention issues: built for another torch.
		{"undefined torch symbol", "ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi\n", "loader-undefined-symbol", "the symbol is torch's"},
		{"driver library missing", "OSError: libcuda.so.1: cannot open shared object file: No such file or directory\n", "loader-missing-library", "the NVIDIA driver's"},
		{"cuda library missing", "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n", "loader-missing-library", "part of CUDA"},
		{"glibcxx", "ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by /opt/venv/lib/python3.12/site-packages/vllm/_C.abi3.so)\n", "loader-version-not-found", ""},
		{"link -lcuda", "/usr/bin/ld: cannot find -lcuda: No such file or directory\ncollect2: error: ld returned 1 exit status\nsubprocess.CalledProcessError: Command '['/usr/bin/gcc', 'cuda_utils.c']' returned non-zero exit status 1.\n", "link-missing-library", "the NVIDIA driver's"},
		{"safetensors", "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer\n", "weights-corrupt", ""},
		{"hub 429 anonymous", "huggingface_hub.errors.HfHubHTTPError: 429 Too Many Requests for url: https://huggingface.co/api/models/Qwen/Qwen3-8B.\n", "hf-rate-limited", "nothing in the logs shows a token"},
		{"hub 429 with token", "HF_TOKEN is set\nhuggingface_hub.errors.HfHubHTTPError: 429 Too Many Requests for url: https://huggingface.co/api/models/Qwen/Qwen3-8B.\n", "hf-rate-limited", "the requests carried a token (line 1)"},
		{"hub timeout", "requests.exceptions.ReadTimeout: (ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)\"), '(Request ID: 1)')\n", "hf-timeout", ""},
		// CUDA 11.2's libcudart (Debian libcudart11.0): its string for cudaErrorDevicesUnavailable.
		{"busy, CUDA 11", "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n", "gpu-busy", ""},
		// ggml's "failed to initialize CUDA: %s" of cudaGetErrorString(cudaErrorSystemNotReady).
		{"fabric, CUDA named", "ggml_cuda_init: failed to initialize CUDA: system not yet initialized\n", "gpu-fabric-not-ready", ""},
		// NCCL's checks.h CUDACHECK: WARN("Cuda failure '%s'"), then ncclUnhandledCudaError.
		{"nccl cuda failure", "init.cc:100 NCCL WARN Cuda failure 'invalid argument'\nNCCL INFO init.cc:1093 -> 1\n", "nccl-cuda-error", ""},
		// nvidia-container-cli's NVML error, wrapped by a terminal after "initialization error:".
		{"container cli nvml mismatch", "stderr: nvidia-container-cli: initialization error: \nnvml error: driver/library version mismatch: unknown\n", "driver-library-mismatch", ""},
		// requests' raise_for_status line for a Hub URL, and for an HF_ENDPOINT mirror.
		{"requests 429 hub", "requests.exceptions.HTTPError: 429 Client Error: Too Many Requests for url: https://huggingface.co/api/models/Qwen/Qwen3-8B\n", "hf-rate-limited", "nothing in the logs shows a token"},
		{"requests 404 hub file", "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://hf-mirror.com/Qwen/Qwen3-8B/resolve/main/config.json\n", "hf-file-not-found", ""},
		// urllib3's read timeout while a body streams (response.py), with no timeout value.
		{"hub read timeout, body", "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='cdn-lfs.huggingface.co', port=443): Read timed out.\n", "hf-timeout", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(Input{Logs: []Log{{Host: "gpu1", Source: "log", Text: []byte(tt.log)}}})
			if string(d.Cause) != tt.want || !d.Known {
				t.Fatalf("cause %s (known %v), want %s:\n%s", d.Cause, d.Known, tt.want, d.Text())
			}
			if !strings.Contains(d.Explanation, "Layer: ") || !strings.HasPrefix(d.Fix, "Layer: ") && !strings.Contains(d.Fix, "driver") {
				t.Errorf("no layer named:\n%s", d.Text())
			}
			if tt.reading != "" && (!strings.Contains(d.Explanation, "Reading: ") || !strings.Contains(d.Explanation, tt.reading)) {
				t.Errorf("lacks the reading %q:\n%s", tt.reading, d.Text())
			}
		})
	}
}

// TestLayerHubURL: requests' HTTPError and urllib3's timeouts are the
// Hub's only for a Hub URL (classes.HUB_URL, HUB_FILE_URL): the same lines
// for another service, or a 404 of the Hub's API for a repository (no file
// or revision in the URL), name no Hub class.
func TestLayerHubURL(t *testing.T) {
	for _, log := range []string{
		"requests.exceptions.HTTPError: 429 Client Error: Too Many Requests for url: https://api.github.com/repos/x/y\n",
		"requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://pypi.org/simple/vllm/\n",
		"requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/api/models/Qwen/Qwen3-8B\n",
		"requests.exceptions.ConnectionError: HTTPSConnectionPool(host='pypi.org', port=443): Read timed out.\n",
	} {
		d := Classify(Input{Logs: []Log{{Host: "gpu1", Source: "log", Text: []byte(log)}}})
		if strings.HasPrefix(string(d.Cause), "hf-") {
			t.Errorf("%q: cause %s, want none of the Hub's", log, d.Cause)
		}
	}
}

// TestCorpusTextJSONAgree: on every corpus log the text and -json
// renderings say the same: the same cause, known and failure, and the text
// says "no rule" exactly when JSON says known is false for a failure.
func TestCorpusTextJSONAgree(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := Classify(Input{Logs: []Log{{Source: filepath.Base(f), Text: raw}}})
		var r Report
		b, _ := json.Marshal(d.Report([]string{f}))
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		text := d.Text()
		if r.Cause != string(d.Cause) || r.Title != d.Title || r.Fix != d.Fix || r.Known != d.Known || r.Failure != d.Failure {
			t.Errorf("%s: JSON %+v differs from the diagnosis", filepath.Base(f), r)
		}
		if !strings.Contains(text, "Cause: "+r.Title) {
			t.Errorf("%s: text does not carry JSON's title %q", filepath.Base(f), r.Title)
		}
		noRule := strings.Contains(text, "No rule of rayform's knows") || strings.Contains(text, "no known failure pattern")
		if r.Failure && r.Known == noRule {
			t.Errorf("%s: JSON known %v but the text says no rule knows it: %v\n%s", filepath.Base(f), r.Known, noRule, text)
		}
	}
}
