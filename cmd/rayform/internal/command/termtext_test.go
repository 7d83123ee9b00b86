package command

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileText is what a hostile hub or host puts in a string rayform
// prints: a clipboard write (OSC 52), a window title (OSC 0), a screen
// clear (CSI 2J), the 8-bit CSI as a character, and a bidi override.
const hostileText = "x\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\u009b2J\u202ey"

// terminalControls lists the bytes that must never reach the terminal
// from hostileText.
var terminalControls = []string{"\x1b", "\x07", "\u009b", "\u202e"}

// TestRemoteTextEscaped (issue 30, item 4): a hub whose file list names a
// file with terminal controls, and which gives it no size: plan's error
// names the file, and what reaches stdout and stderr carries
// the controls only escaped (as \u001b …), in text and in -json, while the
// JSON stays valid and still holds the hub's text. Before the fix, the
// error reached the terminal raw.
func TestRemoteTextEscaped(t *testing.T) {
	name := "config" + hostileText + ".json"
	body, err := json.Marshal(map[string]any{
		"id": "org/m", "sha": strings.Repeat("a", 40),
		"siblings": []map[string]any{{"rfilename": name}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(body)
	}))
	defer hub.Close()
	dir := t.TempDir()
	// The node's SSH port refuses: nothing leaves the loopback.
	hcl := fmt.Sprintf(`node "a" {
  host = "127.0.0.1"
  port = 1
  gpus = 1
}

ray_cluster "c" {
  image = "x:1"
  head  = node.a
}

model "m" {
  source   = "org/m"
  endpoint = %q
}

vllm_serve "s" {
  cluster = ray_cluster.c
  model   = model.m.source
}
`, hub.URL)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", t.TempDir())
	// (apply takes the lock on the node before it asks the hub: the lab's
	// TestE2EUntrustedText shows apply.)
	for _, args := range [][]string{{"plan"}, {"plan", "-json"}} {
		r := runIn(t, dir, args...)
		what := strings.Join(args, " ")
		if r.code == 0 {
			t.Errorf("%s: exit 0", what)
		}
		out := r.stdout + r.stderr
		if !strings.Contains(out, `\u001b]52;c;ZXZpbA==`) {
			t.Errorf("%s: the file's name is not in the output, escaped:\n%s", what, out)
		}
		for _, c := range terminalControls {
			if strings.Contains(out, c) {
				t.Errorf("%s: %q reached the terminal:\n%q", what, c, out)
			}
		}
		if args[len(args)-1] != "-json" {
			continue
		}
		found := false
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Errorf("%s: not JSON: %v\n%q", what, err, line)
			}
			if strings.Contains(fmt.Sprint(v), name) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no JSON line holds the file's name as the hub gave it:\n%s", what, r.stdout)
		}
	}
}

// TestEarlyErrorEscaped: an error realMain prints before any command runs
// (a -chdir naming a directory with controls in its name) is escaped too:
// the escaper sits in front of stdout and stderr from the start.
func TestEarlyErrorEscaped(t *testing.T) {
	r := runIn(t, t.TempDir(), "-chdir="+filepath.Join(t.TempDir(), hostileText), "plan")
	if r.code == 0 || !strings.Contains(r.stderr, `\u001b[2J`) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	for _, c := range terminalControls {
		if strings.Contains(r.stderr, c) {
			t.Errorf("%q reached the terminal: %q", c, r.stderr)
		}
	}
}
