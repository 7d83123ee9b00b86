package observe

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestProbeGPUSection runs the probe's gpu section in sh against stand-in
// nvidia-smi programs that answer as the real one does (the words and exit
// codes of testdata/observe/h100: an unknown field is exit 2, no driver is
// exit 9): a current driver, a driver too old for compute_cap (the probe
// falls back to the seven fields), and no driver (the error, once).
func TestProbeGPUSection(t *testing.T) {
	const line9 = "0, NVIDIA H100 80GB HBM3, GPU-485d5152-73b4-0522-3ce3-168526eda750, 81559, 0, 81079, 580.159.04, 9.0, Disabled"
	const line7 = "0, NVIDIA A100-SXM4-40GB, GPU-a, 40960, 0, 40536, 470.57.02"
	tests := []struct {
		name, smi string
		want      GPUFacts
		calls     string
	}{
		{"current driver", `case "$1" in
--version) printf 'NVIDIA-SMI version  : 580.159.04\nCUDA Version        : 13.0\n' ;;
*) printf '%s\n' '` + line9 + `' ;;
esac`, GPUFacts{CUDA: "13.0", List: []GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-485d5152-73b4-0522-3ce3-168526eda750",
			MemoryTotalMiB: 81559, MemoryFreeMiB: 81079, Driver: "580.159.04", ComputeCap: "9.0", MIGMode: "Disabled"}}}, "q9 v "},
		// The lab's simnode says so on a line of its --version that
		// NVIDIA's tool never prints; nothing else differs.
		{"a simulated nvidia-smi", `case "$1" in
--version) printf 'NVIDIA-SMI version  : 580.159.04\nCUDA Version        : 13.0\nSimulated by        : rayform simnode\n' ;;
*) printf '%s\n' '` + line9 + `' ;;
esac`, GPUFacts{CUDA: "13.0", Simulator: "rayform simnode", List: []GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-485d5152-73b4-0522-3ce3-168526eda750",
			MemoryTotalMiB: 81559, MemoryFreeMiB: 81079, Driver: "580.159.04", ComputeCap: "9.0", MIGMode: "Disabled"}}}, "q9 v "},
		{"a driver without compute_cap", `case "$1" in
*compute_cap*) printf 'Field "compute_cap" is not a valid field to query.\n\n'; exit 2 ;;
--version) printf "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"; exit 2 ;;
*) printf '%s\n' '` + line7 + `' ;;
esac`, GPUFacts{List: []GPU{{Index: 0, Name: "NVIDIA A100-SXM4-40GB", UUID: "GPU-a", MemoryTotalMiB: 40960, MemoryFreeMiB: 40536, Driver: "470.57.02"}}}, "q9 q7 v "},
		{"no driver", `printf "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"; exit 9`,
			GPUFacts{Err: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."}, "q9 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := toolDir(t)
			log := filepath.Join(t.TempDir(), "calls")
			// The stand-in logs each call: q9, q7 (the fallback query) or v.
			script := "#!/bin/sh\ncase \"$*\" in *mig.mode*) printf 'q9 ' >>" + log + " ;; --version) printf 'v ' >>" + log + " ;; *) printf 'q7 ' >>" + log + " ;; esac\n" + tt.smi + "\n"
			if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := Parse(runLocal(t, ProbeScript(HostSpec{}), dir))
			if err != nil {
				t.Fatal(err)
			}
			got := f.GPUs
			got.Err = strings.TrimSpace(got.Err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("GPUs:\n got %+v\nwant %+v", got, tt.want)
			}
			calls, _ := os.ReadFile(log)
			if string(calls) != tt.calls {
				t.Errorf("nvidia-smi calls %q, want %q", calls, tt.calls)
			}
		})
	}
}
