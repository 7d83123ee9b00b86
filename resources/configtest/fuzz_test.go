package configtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
)

// FuzzLoadConfig loads arbitrary bytes as a configuration, in native syntax
// or (when the input starts with '{') JSON syntax, and checks that loading
// never panics and that a configuration without errors can be re-evaluated
// and graphed.
func FuzzLoadConfig(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(repoRoot, "examples/*/*.hcl"))
	more, _ := filepath.Glob(filepath.Join(repoRoot, "testdata/config/*/*/*.hcl*"))
	for _, p := range append(seeds, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		name := "main.hcl"
		if strings.HasPrefix(strings.TrimSpace(string(src)), "{") {
			name = "main.hcl.json"
		}
		cfg, diags := loadFiles(map[string][]byte{name: src}, config.Options{BaseDir: t.TempDir()})
		if cfg == nil || cfg.Files == nil {
			t.Fatal("LoadFiles returned no Config or no Files")
		}
		if diags.HasErrors() {
			return
		}
		if _, err := cfg.Graph().TopoOrder(); err != nil {
			t.Fatalf("valid configuration has a cyclic graph: %v", err)
		}
		if _, diags := cfg.WithFacts(kind.Facts{}); diags.HasErrors() {
			t.Fatalf("re-evaluation failed: %s", diags.Error())
		}
	})
}
