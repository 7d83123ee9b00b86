package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/cmd/simnode/internal/golden"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// bundle writes an OCI bundle whose config.json has root.path rootPath and
// process.env env, and returns the bundle dir.
func bundle(t *testing.T, rootPath string, env []string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{"root": map[string]any{"path": rootPath}, "process": map[string]any{"env": env}}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPrestart(t *testing.T) {
	h200 := golden.Path("hardware", "h200x2.json")
	tests := []struct {
		name     string
		hardware string
		env      []string
		relRoot  bool
		wantGPUs int // -1: no file written
		wantErr  string
	}{
		{"all gpus", h200, []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"}, false, 2, ""},
		{"relative root", h200, []string{"NVIDIA_VISIBLE_DEVICES=all"}, true, 2, ""},
		{"one gpu", h200, []string{"NVIDIA_VISIBLE_DEVICES=1"}, false, 1, ""},
		{"void", h200, []string{"NVIDIA_VISIBLE_DEVICES=void"}, false, -1, ""},
		{"not requested", h200, []string{"PATH=/bin"}, false, -1, ""},
		{"unknown device", h200, []string{"NVIDIA_VISIBLE_DEVICES=7"}, false, -1, "nvidia-container-cli: device error: 7: unknown device"},
		{"no driver", golden.Path("hardware", "absent.json"), []string{"NVIDIA_VISIBLE_DEVICES=all"}, false, -1, "libnvidia-ml.so.1: cannot open shared object file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rootfs := t.TempDir()
			rootPath := rootfs
			var dir string
			if tt.relRoot {
				dir = bundle(t, "rootfs", tt.env)
				rootfs = filepath.Join(dir, "rootfs")
			} else {
				dir = bundle(t, rootPath, tt.env)
			}
			state := `{"ociVersion":"1.2.0","id":"c1","status":"creating","pid":42,"bundle":"` + dir + `"}`
			var errb bytes.Buffer
			p := &sim.Proc{Args: []string{"prestart"}, Env: sim.Env{"SIMNODE_HARDWARE": tt.hardware}, Stdin: strings.NewReader(state), Stdout: &errb, Stderr: &errb}
			code := Main(context.Background(), p)
			if tt.wantErr != "" {
				if code != 1 || !strings.Contains(errb.String(), tt.wantErr) {
					t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errb.String(), tt.wantErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			b, err := os.ReadFile(filepath.Join(rootfs, "etc", "simnode", "hardware.json"))
			if tt.wantGPUs < 0 {
				if err == nil {
					t.Fatal("hardware file written, want none")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h, err := hw.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.GPUs) != tt.wantGPUs {
				t.Errorf("container sees %d GPUs, want %d", len(h.GPUs), tt.wantGPUs)
			}
			if tt.name == "one gpu" && h.GPUs[0].UUID != "GPU-5e1c0d3a-0001-4b7e-9a2f-51a7e0000001" {
				t.Errorf("GPU 1 keeps its UUID: got %s", h.GPUs[0].UUID)
			}
		})
	}
}

func TestBadInvocation(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{{nil, 2}, {[]string{"frobnicate"}, 2}, {[]string{"poststart"}, 0}, {[]string{"poststop"}, 0}}
	for _, tt := range tests {
		var b bytes.Buffer
		if code := Main(context.Background(), &sim.Proc{Args: tt.args, Env: sim.Env{}, Stdin: strings.NewReader(""), Stdout: &b, Stderr: &b}); code != tt.code {
			t.Errorf("hook %v: exit %d, want %d", tt.args, code, tt.code)
		}
	}
}
