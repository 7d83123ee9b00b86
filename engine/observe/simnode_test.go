package observe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

// TestProbeAgainstSimnode runs the probe with the lab's simulated GPU tools
// (cmd/simnode playing nvidia-smi and ibdev2netdev) on PATH, so the probe
// and the lab agree on flags and output formats.
func TestProbeAgainstSimnode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/simnode")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build simnode")
	}
	dir := toolDir(t, "ip", "timeout")
	bin := os.Getenv("RAYFORM_SIMNODE") // a prebuilt simnode, if given
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "simnode")
		if out, err := exec.Command(gobin, "build", "-o", bin, "../../cmd/simnode").CombinedOutput(); err != nil {
			// cmd/simnode belongs to another package; its build failing
			// is reported by its own tests.
			t.Skipf("cannot build cmd/simnode: %v\n%s", err, out)
		}
	}
	for _, tool := range []string{"nvidia-smi", "ibdev2netdev"} {
		if out, err := exec.Command("ln", "-s", bin, filepath.Join(dir, tool)).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	tests := []struct {
		name, hardware string
		check          func(t *testing.T, f *HostFacts)
	}{
		{"gb10", "simnode-gb10.json", func(t *testing.T, f *HostFacts) {
			if len(f.GPUs.List) != 1 || f.GPUs.List[0].Name != "NVIDIA GB10" || !f.UnifiedMemory || f.GPUs.List[0].UUID == "" {
				t.Errorf("GPUs %+v unified %v", f.GPUs, f.UnifiedMemory)
			}
			if len(f.RDMA.List) != 2 || f.RDMA.List[0].NetDev != "enp1s0f1np1" || f.RDMA.Err != "" {
				t.Errorf("RDMA %+v", f.RDMA)
			}
		}},
		{"h200x8", "simnode-h200x8.json", func(t *testing.T, f *HostFacts) {
			if len(f.GPUs.List) != 8 || f.UnifiedMemory || f.GPUs.List[7].MemoryTotalMiB != 143771 || f.GPUs.List[7].Driver != "580.159.04" {
				t.Errorf("GPUs %+v unified %v", f.GPUs, f.UnifiedMemory)
			}
		}},
		{"no driver", "absent.json", func(t *testing.T, f *HostFacts) {
			if len(f.GPUs.List) != 0 || f.GPUs.Err != "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running." {
				t.Errorf("GPUs %+v", f.GPUs)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hw, err := filepath.Abs(filepath.Join(testdata, tt.hardware))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := local.New(local.Options{}).Run(ctx, transport.Cmd{
				Script: ProbeScript(HostSpec{}),
				Env:    map[string]string{"PATH": dir, "SIMNODE_HARDWARE": hw},
			})
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			f, err := Parse(res.Stdout)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f)
		})
	}
}
