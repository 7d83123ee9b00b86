package command

import (
	"os"
	"strings"
	"testing"
)

// TestGraphCommand checks that rayform graph prints the DOT of the DGX
// Spark pair's DAG, pinned by the same golden file as engine/config's test.
func TestGraphCommand(t *testing.T) {
	want, err := os.ReadFile(repoPath(t, "testdata/config/dgx-spark-pair.dot"))
	dir := repoPath(t, "examples/dgx-spark-pair")
	if err != nil {
		t.Fatal(err)
	}
	r := runIn(t, dir, "graph")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if r.stdout != string(want) {
		t.Errorf("wrong graph\ngot:\n%s\nwant:\n%s", r.stdout, want)
	}
}

func TestGraphErrors(t *testing.T) {
	tests := []struct {
		name, dir  string
		args       []string
		wantStderr string
	}{
		{"cycle", "testdata/config/invalid/dependency-cycle", nil, "Error: Dependency cycle"},
		{"bastion cycle", "testdata/config/invalid/bastion-cycle", nil, "node.a -> node.b -> node.a"},
		{"stray argument", "examples/dgx-spark-pair", []string{"x"}, "graph takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runIn(t, repoPath(t, tt.dir), append([]string{"graph"}, tt.args...)...)
			if r.code != ExitError || r.stdout != "" || !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr (want %q):\n%s", r.code, ExitError, r.stdout, tt.wantStderr, r.stderr)
			}
		})
	}
}

func TestGraphForEachWithVars(t *testing.T) {
	r := runIn(t, repoPath(t, "examples/h100-4x8-pp"), "graph", "-var", `hosts={ h1 = "a", h2 = "b" }`)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{`"node.h100[\"h1\"]"`, `"node.h100[\"h2\"]"`, `"ray_cluster.main" -> "node.h100[\"h2\"]"`, `"node.h100[\"h1\"]" -> "node.jump"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("graph lacks %s:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, `h100[\"h3\"]`) {
		t.Errorf("-var hosts must replace the default hosts:\n%s", r.stdout)
	}
}
