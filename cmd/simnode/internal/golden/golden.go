// Package golden compares test output with files under testdata/simnode,
// rewriting them when the test runs with -update.
package golden

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the absolute path of testdata/simnode in the repository.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	// file is <repo>/cmd/simnode/internal/golden/golden.go
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "testdata", "simnode")
}

// Path joins elem under testdata/simnode.
func Path(elem ...string) string { return filepath.Join(append([]string{Dir()}, elem...)...) }

// Check compares got with the golden file rel (under testdata/simnode) and
// rewrites it when update is set.
func Check(t *testing.T, update bool, rel, got string) {
	t.Helper()
	p := Path(rel)
	if update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (run with -update to accept)\ngot:\n%s\nwant:\n%s", rel, got, want)
	}
}
