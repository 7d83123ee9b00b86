//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// stateAddrs reads the addresses and hosts the state file records.
func stateAddrs(t *testing.T, dir string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".rayform", "state.json"))
	if os.IsNotExist(err) {
		return map[string][]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Resources map[string]struct {
			Hosts []struct{ Node string }
		}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state: %v\n%s", err, b)
	}
	out := map[string][]string{}
	for addr, r := range st.Resources {
		out[addr] = []string{}
		for _, h := range r.Hosts {
			out[addr] = append(out[addr], h.Node)
		}
		sort.Strings(out[addr])
	}
	return out
}

// TestE2EStateMatchesTheHosts checks issue 12's findings 4 and 5: the state
// records what exists on the hosts after every run, however it ended, so
// removing blocks from the configuration destroys what they made, and no
// sequence of commands makes the state unreadable.
func TestE2EStateMatchesTheHosts(t *testing.T) {
	// Fast mode: the subject is the state file against what the hosts
	// hold, not Ray.
	l := startLab(t, "rfe2estate", fastRay...)
	good := clusterConfig("enp1s0f1np1", seedImage, false, 0.85)
	dir := l.config(good)
	write := func(body string) {
		t.Helper()
		src, err := os.ReadFile(filepath.Join(dir, "main.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		nodes := string(src[:strings.Index(string(src), "\nnetwork ")+1])
		if strings.HasPrefix(body, "EMPTY") {
			nodes, body = "", ""
		}
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(nodes+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan := func() result { return l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode") }
	apply := func() result { return l.rayform("", "-chdir="+dir, "apply", "-auto-approve") }
	leftContainers := func(t *testing.T) {
		t.Helper()
		for _, node := range []string{"spark1", "spark2"} {
			out, err := l.ssh(node, "docker ps -a --filter label=rayform.project="+filepath.Base(dir)+" --format '{{.Names}}'; echo end")
			if err != nil || strings.TrimSpace(out) != "end" {
				t.Errorf("containers of the project left on %s: %v\n%s", node, err, out)
			}
		}
	}

	// A failed apply records nothing that did not happen: the cluster
	// failed and the serve was skipped.
	write(clusterConfig("enp1s0f1np1", "vllm/vllm-openai:v0.19.0", false, 0.85))
	mustCode(t, "apply of an image without Ray", apply(), exitError)
	if got := stateAddrs(t, dir); len(got) != 0 {
		t.Errorf("state after a failed apply records %v; nothing exists", got)
	}

	// The good configuration converges, and the state names both
	// resources on the hosts that hold them.
	write(good)
	mustCode(t, "apply", apply(), exitOK)
	want := map[string][]string{"ray_cluster.spark": {"spark1", "spark2"}, "vllm_serve.qwen": {"spark1"}}
	if got := stateAddrs(t, dir); !equalAddrs(got, want) {
		t.Errorf("state after apply = %v, want %v", got, want)
	}

	// A state that lost its records (an earlier run killed, say) gets them
	// back from a no-op apply.
	if err := os.Remove(filepath.Join(dir, ".rayform", "state.json")); err != nil {
		t.Fatal(err)
	}
	r := apply()
	mustCode(t, "no-op apply without a state", r, exitOK)
	mustContain(t, "no-op apply without a state", r.stdout, "No changes.")
	if got := stateAddrs(t, dir); !equalAddrs(got, want) {
		t.Errorf("state after a no-op apply = %v, want %v", got, want)
	}

	// A save that fails is an error (finding 9): another run (here, a hand
	// edit standing for one run with -lock=false) saved the state while
	// this apply worked.
	if out, err := l.ssh("spark1", "docker exec rayform-spark sh -c 'kill $(cat /tmp/rayform/serve/serve-qwen.pid)'"); err != nil {
		t.Fatalf("killing vllm serve: %v\n%s", err, out)
	}
	busy, busyOut := l.start("-chdir="+dir, "apply", "-auto-approve", "-lock=false")
	waitFor(t, "the apply to start the serve", time.Minute, func() bool { return strings.Contains(busyOut.String(), "start vllm serve qwen") })
	statePath := filepath.Join(dir, ".rayform", "state.json")
	b, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	bumped := regexp.MustCompile(`"serial": (\d+)`).ReplaceAllString(string(b), `"serial": 999`)
	if err := os.WriteFile(statePath, []byte(bumped), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := busy.Wait(); err == nil {
		t.Errorf("an apply whose state save failed exited 0\n%s", busyOut)
	}
	mustContain(t, "apply whose save failed", busyOut.String(), "Error: saving state", "another rayform run saved it in between")
	if strings.Contains(busyOut.String(), "Apply complete!") {
		t.Errorf("an apply whose state save failed said it completed\n%s", busyOut)
	}
	mustCode(t, "apply after the failed save", apply(), exitOK)

	// The serve block removed: plan destroys the serve, apply stops it.
	write(strings.Split(good, "vllm_serve \"qwen\"")[0])
	r = plan()
	mustCode(t, "plan without the serve block", r, exitChanges)
	mustContain(t, "plan without the serve block", r.stdout, "# vllm_serve.qwen will be destroyed")
	mustCode(t, "apply without the serve block", apply(), exitOK)
	mustCode(t, "plan after removing the serve", plan(), exitOK)
	if out, _ := l.ssh("spark1", "curl -s -o /dev/null -w '%{http_code}' -m 5 http://192.168.200.12:8000/health"); strings.TrimSpace(out) != "000" {
		t.Errorf("the serve still answers after its block was removed: %q", out)
	}

	// Every block removed, nodes included: destroy removes everything the
	// state names, and every later command still reads the state.
	write(good)
	mustCode(t, "apply again", apply(), exitOK)
	write("EMPTY")
	r = l.rayform("", "-chdir="+dir, "destroy", "-auto-approve")
	mustCode(t, "destroy with an empty configuration", r, exitOK)
	leftContainers(t)
	if got := stateAddrs(t, dir); len(got) != 0 {
		t.Errorf("state after destroying everything = %v, want empty", got)
	}
	mustCode(t, "plan of an empty configuration", plan(), exitOK)
	mustCode(t, "apply of an empty configuration", apply(), exitOK)
	mustCode(t, "destroy of an empty configuration", l.rayform("", "-chdir="+dir, "destroy", "-auto-approve"), exitOK)
}

func equalAddrs(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, ",") != strings.Join(b[k], ",") {
			return false
		}
	}
	return true
}
