package cudacompat

import (
	"os"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/observe"
)

// realH100 is the GPU facts rayform's probe read on a real H100 host
// (testdata/observe/h100/probe.out: driver 580.159.04, CUDA 13.0, 9.0).
func realH100(t *testing.T) observe.GPUFacts {
	t.Helper()
	b, err := os.ReadFile("../../testdata/observe/h100/probe.out")
	if err != nil {
		t.Fatal(err)
	}
	f, err := observe.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return f.GPUs
}

func gpus(driver, cuda, cc, mig string) observe.GPUFacts {
	return observe.GPUFacts{CUDA: cuda, List: []observe.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", Driver: driver, ComputeCap: cc, MIGMode: mig}}}
}

// The NVIDIA_REQUIRE_CUDA of nvidia/cuda:12.8.1-base-ubuntu24.04 (its
// brand alternatives accept the forward-compatible driver branches).
const require128 = "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=grid,driver>=470,driver<471 brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536"

func TestJudge(t *testing.T) {
	tests := []struct {
		name string
		g    observe.GPUFacts
		img  Image
		want []string // substrings of the findings' summaries, in order; "!" prefix: a warning
	}{
		{"real H100 and a CUDA 13.0 image", realH100(t), Image{Ref: "vllm", Env: map[string]string{"NVIDIA_REQUIRE_CUDA": "cuda>=13.0", "TORCH_CUDA_ARCH_LIST": "7.5 8.0 8.6 9.0 10.0 12.0+PTX"}}, nil},
		{"real H100 and a CUDA 13.1 image", realH100(t), Image{Ref: "vllm:next", Env: map[string]string{"NVIDIA_REQUIRE_CUDA": "cuda>=13.1"}},
			[]string{"the driver on h1 (580.159.04, CUDA 13.0) is older than the image vllm:next needs (CUDA 13.1, from its NVIDIA_REQUIRE_CUDA)"}},
		{"real H100 and an image built without sm_90", realH100(t), Image{Ref: "gb10", Env: map[string]string{"TORCH_CUDA_ARCH_LIST": "8.0 12.1a"}},
			[]string{"the image gb10 has no kernels for compute capability 9.0 (NVIDIA H100 80GB HBM3 on h1): it was built for sm_80, sm_121a"}},
		{"old driver, CUDA derived from the driver", gpus("535.54.03", "", "9.0", "Disabled"), Image{Ref: "img", Env: map[string]string{"CUDA_VERSION": "12.8.1"}},
			[]string{"!the driver on h1 (535.54.03, CUDA 12.2) is older than the image img needs (CUDA 12.8, from its CUDA_VERSION)"}},
		{"major newer, CUDA_VERSION only", gpus("535.54.03", "12.2", "9.0", ""), Image{Ref: "img", Env: map[string]string{"CUDA_VERSION": "13.0.1"}},
			[]string{"the driver on h1 (535.54.03, CUDA 12.2) is older than the image img needs (CUDA 13.0"}},
		{"forward-compatible branch accepted by the brand clause", gpus("535.54.03", "12.2", "9.0", ""), Image{Ref: "img", Env: map[string]string{"NVIDIA_REQUIRE_CUDA": require128}}, nil},
		{"a branch the brand clause does not name", gpus("550.54.15", "12.4", "9.0", ""), Image{Ref: "img", Env: map[string]string{"NVIDIA_REQUIRE_CUDA": require128}},
			[]string{"the driver on h1 (550.54.15, CUDA 12.4) is older than the image img needs (CUDA 12.8"}},
		{"NVIDIA_DISABLE_REQUIRE in the cluster's env: a warning", gpus("550.54.15", "12.4", "9.0", ""), Image{Ref: "img", Env: map[string]string{"NVIDIA_REQUIRE_CUDA": "cuda>=12.8"}, ContainerEnv: map[string]string{"NVIDIA_DISABLE_REQUIRE": "1"}},
			[]string{"!the driver on h1"}},
		{"PTX that can JIT", gpus("580.95.05", "13.0", "12.1", ""), Image{Ref: "img", Env: map[string]string{"TORCH_CUDA_ARCH_LIST": "9.0 10.0+PTX"}}, nil},
		{"cubin of a lower minor of the same major", gpus("580.95.05", "13.0", "8.6", ""), Image{Ref: "img", Env: map[string]string{"TORCH_CUDA_ARCH_LIST": "8.0;9.0"}}, nil},
		{"an exact (a) cubin does not run on another minor", gpus("580.95.05", "13.0", "10.3", ""), Image{Ref: "img", Env: map[string]string{"TORCH_CUDA_ARCH_LIST": "10.0a"}},
			[]string{"no kernels for compute capability 10.3"}},
		{"MIG", gpus("580.95.05", "13.0", "9.0", "Enabled"), Image{Ref: "img"}, []string{"GPU 0 of h1 is in MIG mode"}},
		{"fabric manager failed on an NVSwitch host", observe.GPUFacts{CUDA: "13.0", NVSwitches: []string{"0000:05:00.0"}, FabricManager: "failed",
			List: []observe.GPU{{Driver: "580.95.05", ComputeCap: "9.0"}}}, Image{Ref: "img"},
			[]string{"the fabric manager is not running on h1 (nvidia-fabricmanager: failed)"}},
		{"fabric manager active", observe.GPUFacts{CUDA: "13.0", NVSwitches: []string{"0000:05:00.0"}, FabricManager: "active",
			List: []observe.GPU{{Driver: "580.95.05", ComputeCap: "9.0"}}}, Image{Ref: "img"}, nil},
		{"host compat libcuda older than the driver", observe.GPUFacts{CUDA: "13.0", LibCUDA: "/usr/local/cuda-12.8/compat/libcuda.so.570.86.10",
			List: []observe.GPU{{Driver: "580.95.05", ComputeCap: "9.0"}}}, Image{Ref: "img"},
			[]string{"libcuda.so.1 on h1 is a CUDA compat library"}},
		{"image compat dir on a driver that does not need it", realH100(t), Image{Ref: "img", Env: map[string]string{"CUDA_VERSION": "12.8.1", "LD_LIBRARY_PATH": "/usr/local/cuda-12.8/compat:/usr/local/nvidia/lib64"}},
			[]string{"the image img loads the CUDA compat library of CUDA 12.8 (LD_LIBRARY_PATH has /usr/local/cuda-12.8/compat) on h1, whose driver 580.159.04 supports CUDA 13.0 itself"}},
		{"no GPU facts: nothing judged", observe.GPUFacts{Err: "nvidia-smi: not installed"}, Image{Ref: "img", Env: map[string]string{"CUDA_VERSION": "99.0"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Judge("h1", tt.g, tt.img)
			if len(got) != len(tt.want) {
				t.Fatalf("%d findings, want %d: %+v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				warn := strings.HasPrefix(w, "!")
				if !strings.Contains(got[i].Summary, strings.TrimPrefix(w, "!")) || got[i].Error == warn {
					t.Errorf("finding %d: %+v\nwant (warning %v) %q", i, got[i], warn, w)
				}
				if got[i].Fix == "" || got[i].Detail == "" {
					t.Errorf("finding %d has no fix or detail: %+v", i, got[i])
				}
			}
		})
	}
}

func TestMinDriverAndDriverCUDA(t *testing.T) {
	for _, tt := range []struct{ cuda, driver string }{{"13.0", "580.65.06"}, {"12.8", "570.26"}, {"12.7", "570.26"}, {"12.4", "550.54.14"}, {"99.0", ""}} {
		v, _ := ParseVersion(tt.cuda)
		if got := MinDriver(v); got != tt.driver {
			t.Errorf("MinDriver(%s) = %q, want %q", tt.cuda, got, tt.driver)
		}
	}
	for _, tt := range []struct{ driver, reported, want string }{{"580.159.04", "13.0", "13.0"}, {"580.159.04", "", "13.0"}, {"570.124.06", "", "12.8"}, {"535.54.03", "", "12.2"}, {"535.54.02", "", "12.1"}} {
		v, ok := DriverCUDA(tt.driver, tt.reported)
		if !ok || v.String() != tt.want {
			t.Errorf("DriverCUDA(%s, %q) = %v %v, want %s", tt.driver, tt.reported, v, ok, tt.want)
		}
	}
}

// TestArchListOfRealTorch: torch's own arch list on the real H100 host
// (testdata/observe/h100/torch.txt) read as the judgment reads it.
func TestArchListOfRealTorch(t *testing.T) {
	b, err := os.ReadFile("../../testdata/observe/h100/torch.txt")
	if err != nil {
		t.Fatal(err)
	}
	// The last words of the line are torch._C._cuda_getArchFlags().
	line := strings.Split(string(b), "\n")[1]
	flags := line[strings.LastIndex(line, ") ")+2:]
	flags = flags[strings.Index(flags, "sm_"):]
	archs := ParseArchList(flags)
	if got := archNames(archs); got != "sm_75, sm_80, sm_86, sm_90, sm_100, sm_120" {
		t.Fatalf("arch list %q from %q", got, flags)
	}
	for cc, want := range map[string]bool{"9.0": true, "8.9": true, "12.1": true, "10.3": true, "7.0": false, "11.0": false} {
		v, _ := ParseVersion(cc)
		if _, ok := Runs(archs, v); ok != want {
			t.Errorf("Runs(torch 2.11.0+cu130, %s) = %v, want %v", cc, ok, want)
		}
	}
}
