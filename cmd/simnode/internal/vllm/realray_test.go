package vllm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// TestRealRayOnPath: the real-Ray executor is chosen only when the ray on
// PATH is not simnode (a link to it, as in the -ray simnode image).
func TestRealRayOnPath(t *testing.T) {
	tests := []struct {
		name string
		make func(dir string) error
		want bool
	}{
		{"no ray", func(string) error { return nil }, false},
		{"ray is simnode", func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "simnode"), []byte("x"), 0o755); err != nil {
				return err
			}
			return os.Symlink("simnode", filepath.Join(dir, "ray"))
		}, false},
		{"ray is Ray's entry point", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "ray"), []byte("#!/usr/bin/python3\n"), 0o755)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tt.make(dir); err != nil {
				t.Fatal(err)
			}
			if got := realRayOnPath(sim.Env{"PATH": dir}); got != tt.want {
				t.Errorf("realRayOnPath = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRealRaySourceCitesVLLM: the embedded executor names the vLLM
// version and files it follows.
func TestRealRaySourceCitesVLLM(t *testing.T) {
	for _, want := range []string{"vLLM 0.17.1", "vllm/v1/executor/ray_utils.py", "vllm/v1/executor/ray_executor.py", "vllm/utils/network_utils.py"} {
		if !strings.Contains(realRaySource, want) {
			t.Errorf("ray_executor.py does not cite %q", want)
		}
	}
}
