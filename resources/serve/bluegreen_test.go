package serve

import (
	"slices"
	"strings"
	"testing"
)

// TestNextSpec: a blue/green replacement's new generation has files of
// its own, listens on loopback at its own port, and records the serve it
// becomes (the hash plan compares), while the serve's spec is untouched.
func TestNextSpec(t *testing.T) {
	s := ServeSpec{Resource: "vllm_serve.qwen", Name: "qwen", Container: "rayform-spark", Node: "spark1", Port: 8000,
		Args: []string{"vllm", "serve", "m", "--host", "192.168.200.12", "--port", "8000", "--max-model-len", "2048"}}
	before := slices.Clone(s.Args)
	n := s.nextSpec(41234)
	if want := []string{"vllm", "serve", "m", "--host", "127.0.0.1", "--port", "41234", "--max-model-len", "2048"}; !slices.Equal(n.Args, want) {
		t.Errorf("next args %q, want %q", n.Args, want)
	}
	if !slices.Equal(s.Args, before) {
		t.Errorf("the serve's args changed: %q", s.Args)
	}
	if n.pidPath() == s.pidPath() || n.LogPath() == s.LogPath() || n.specPath() == s.specPath() || n.lockPath() == s.lockPath() {
		t.Errorf("the next generation shares the serve's files: %s %s", n.pidPath(), n.LogPath())
	}
	if n.recordHash() != s.Hash() || s.recordHash() != s.Hash() {
		t.Errorf("record hashes %s, %s; want the serve's %s", n.recordHash(), s.recordHash(), s.Hash())
	}
	if !strings.Contains(n.StartScript(), s.Hash()) {
		t.Errorf("the next generation's start script does not record the serve's hash %s:\n%s", s.Hash(), n.StartScript())
	}
	if n.LocalURL("/health") != "http://127.0.0.1:41234/health" {
		t.Errorf("next LocalURL %s", n.LocalURL("/health"))
	}
	// The promotion renames the next generation's files to the serve's,
	// the pid last.
	p := promoteScript(s)
	if i, j := strings.Index(p, n.specPath()), strings.Index(p, "mv -f "+n.pidPath()); i < 0 || j < i {
		t.Errorf("promote script renames the pid before the record:\n%s", p)
	}
}

// TestGenerationSpec: a serve started behind its front runs vLLM on
// loopback at its own port under the serve's own files and record, and
// only a front started for a serve without one takes its port over.
func TestGenerationSpec(t *testing.T) {
	s := ServeSpec{Resource: "vllm_serve.qwen", Name: "qwen", Container: "rayform-spark", Node: "spark1", Port: 8000,
		Args: []string{"vllm", "serve", "m", "--host", "192.168.200.12", "--port", "8000"}}
	g := s.generationSpec(41234)
	if want := []string{"vllm", "serve", "m", "--host", "127.0.0.1", "--port", "41234"}; !slices.Equal(g.Args, want) {
		t.Errorf("generation args %q, want %q", g.Args, want)
	}
	if g.pidPath() != s.pidPath() || g.LogPath() != s.LogPath() || g.specPath() != s.specPath() || g.recordHash() != s.Hash() {
		t.Errorf("the generation does not keep the serve's files and record: %s %s %s", g.pidPath(), g.LogPath(), g.recordHash())
	}
	for _, tc := range []struct {
		takeOver bool
		want     string
	}{{false, `old=""`}, {true, "old=$(cat " + s.pidPath()}} {
		args := s.startFrontArgs("192.168.200.12", tc.takeOver)
		if script := args[len(args)-1]; !strings.Contains(script, tc.want) || !strings.Contains(script, "192.168.200.12 8000 ") {
			t.Errorf("takeOver %v: front script does not hold %q:\n%s", tc.takeOver, tc.want, script)
		}
	}
}
