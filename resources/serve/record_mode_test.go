package serve

import (
	"os"
	"path/filepath"
	"testing"
)

// Issue 23, item 7: the serve record (which holds digests of the serve's
// sensitive attributes) under /var/tmp is not world-readable, also where an
// earlier serve left a 0644 one.
func TestServeRecordNotWorldReadable(t *testing.T) {
	bin := linkTools(t, "flock", "cat", "mkdir", "rm")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "serve-qwen.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := ServeSpec{Resource: "vllm_serve.qwen", Name: "qwen", Args: []string{"vllm", "serve", "m"}}
	startServe(t, spec, dir, bin)
	fi, err := os.Stat(filepath.Join(dir, "serve-qwen.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("serve record mode %o, want 600", fi.Mode().Perm())
	}
}
