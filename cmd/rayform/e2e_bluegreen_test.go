//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// TestE2EBlueGreen (issue 39 item 2, done-when (b)): on the real-vLLM lab
// with 2 GPUs a node, the lab's TP=2 serve leaves Ray 2 GPUs free, room
// for the new serve beside it. A max_model_len change is then blue/green:
// plan says so, apply starts the new serve on a loopback port, switches
// the endpoint (the serve's front takes the port over from the old vLLM),
// stops the old one and prints that it switched, and a client polling
// /health every 0.5 s from the worker sees no failed poll. A second change
// switches again, the front already in place. After each, plan is empty
// and the endpoint serves the new max_model_len.
func TestE2EBlueGreen(t *testing.T) {
	if os.Getenv("RAYFORM_E2E_RAY") == "simnode" {
		t.Skip("RAYFORM_E2E_RAY=simnode: the real vLLM runs on the real Ray")
	}
	l := startLab(t, "rfe2ebg", "-vllm", "real", "-gpus", "2")
	dir := l.dir
	hcl := filepath.Join(dir, "rayform.hcl")
	if src := readFile(t, hcl); strings.Contains(src, "gpus          = 1\n") {
		if err := os.WriteFile(hcl, []byte(strings.ReplaceAll(src, "gpus          = 1\n", "gpus          = 2\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir", dir}, args...)...) }
	first := run("apply", "-auto-approve")
	mustCode(t, "first apply", first, exitOK)
	t.Logf("first apply took %s", first.elapsed.Round(time.Second))
	health := "http://" + lab.FabricIP(0) + ":8000/health"

	for _, c := range []struct{ from, to string }{{"4096", "2048"}, {"2048", "3072"}} {
		editFile(t, hcl, "max_model_len          = "+c.from, "max_model_len          = "+c.to)
		pl := run("plan")
		mustContain(t, "plan of max_model_len "+c.to, pl.stdout, "blue/green: no downtime")
		p := l.pollHealth(t, "spark2", health)
		began := time.Now()
		r := run("apply", "-auto-approve")
		p.awaitAnswer(t, time.Minute)
		polls := p.stop()
		mustCode(t, "apply of max_model_len "+c.to, r, exitOK)
		mustContain(t, "apply of max_model_len "+c.to, r.stdout, "switched ", "without downtime")
		seen, fails := polls.outage()
		t.Logf("max_model_len %s -> %s, blue/green: apply %s; the client saw %.1f s of downtime (%d failed polls of %d)",
			c.from, c.to, r.elapsed.Round(time.Second), seen.Seconds(), fails, len(polls))
		for _, q := range polls {
			if !q.ok {
				t.Logf("a failed poll at %.1f s of apply's %.1f s (the switch is at its end)", q.at.Sub(began).Seconds(), r.elapsed.Seconds())
			}
		}
		if fails != 0 {
			t.Errorf("max_model_len %s -> %s: %d of %d polls failed (want none)", c.from, c.to, fails, len(polls))
		}
		mustCode(t, "plan after max_model_len "+c.to, run("plan", "-detailed-exitcode"), exitOK)
		st := run("status")
		mustContain(t, "status after max_model_len "+c.to, st.stdout, "health    ok (/health 200)")
	}
}
