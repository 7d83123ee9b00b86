//go:build linux

package e2e

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// TestE2EBlueGreen (issue 39 item 2, done-when (b)): on the real-vLLM lab
// with 2 GPUs a node, the lab's TP=2 serve leaves Ray 2 GPUs free, room
// for the new serve beside it. A max_model_len change is then blue/green:
// plan says so, apply starts the new serve on a loopback port, switches
// the endpoint, stops the old one and prints that it switched. The serve
// started behind its front (the image has python3), so every switch,
// the first included, only repoints the front: a client polling /health
// every 0.5 s from the worker sees no failed poll. After each, plan is
// empty and the serve is healthy.
func TestE2EBlueGreen(t *testing.T) {
	if os.Getenv("RAYFORM_E2E_RAY") == "simnode" {
		t.Skip("RAYFORM_E2E_RAY=simnode: the real vLLM runs on the real Ray")
	}
	l := startLab(t, "rfe2ebg", "-vllm", "real", "-gpus", "2")
	dir := l.dir
	hcl := filepath.Join(dir, "rayform.hcl")
	if src := mustRead(t, hcl); strings.Contains(src, "gpus          = 1\n") {
		if err := os.WriteFile(hcl, []byte(strings.ReplaceAll(src, "gpus          = 1\n", "gpus          = 2\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir", dir}, args...)...) }
	first := run("apply", "-auto-approve")
	mustCode(t, "first apply", first, exitOK)
	t.Logf("first apply took %s", first.elapsed.Round(time.Second))
	mustContain(t, "first apply", first.stdout, "front: listening on "+lab.FabricIP(0)+":8000")
	health := "http://" + lab.FabricIP(0) + ":8000/health"

	for _, c := range []struct{ from, to string }{{"4096", "2048"}, {"2048", "3072"}} {
		editFile(t, hcl, "max_model_len          = "+c.from, "max_model_len          = "+c.to)
		pl := run("plan")
		mustContain(t, "plan of max_model_len "+c.to, pl.stdout, "blue/green: no downtime")
		p := l.pollHealth(t, "spark2", health)
		began := time.Now()
		cmd, out := l.start("-chdir", dir, "apply", "-auto-approve")
		marks := stampLines(out, "switching the endpoint", "front: listening", "switched ", "completion:")
		err := cmd.Wait()
		r := result{stdout: out.String(), elapsed: time.Since(began)}
		if err != nil {
			r.code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				r.code = ee.ExitCode()
			}
		}
		p.awaitAnswer(t, time.Minute)
		polls := p.stop()
		at := marks()
		if i := strings.Index(r.stdout, "front: listening"); i >= 0 {
			t.Logf("apply: %s", strings.SplitN(r.stdout[i:], "\n", 2)[0])
		}
		for _, m := range []string{"switching the endpoint", "front: listening", "switched ", "completion:"} {
			if ts, ok := at[m]; ok {
				t.Logf("apply printed %q at %.1f s", m, ts.Sub(began).Seconds())
			}
		}
		mustCode(t, "apply of max_model_len "+c.to, r, exitOK)
		mustContain(t, "apply of max_model_len "+c.to, r.stdout, "switched ", "without downtime")
		seen, fails := polls.outage()
		t.Logf("max_model_len %s -> %s, blue/green: apply %s; the client saw %.1f s of downtime (%d failed polls of %d)",
			c.from, c.to, r.elapsed.Round(time.Second), seen.Seconds(), fails, len(polls))
		for _, q := range polls {
			if !q.ok {
				t.Logf("a failed poll answered at %.1f s of apply's %.1f s", q.at.Sub(began).Seconds(), r.elapsed.Seconds())
			}
		}
		if strings.Contains(r.stdout, "taken over from the old serve") {
			t.Errorf("max_model_len %s -> %s: the front took the port over from the old vLLM; the serve should have started behind its front", c.from, c.to)
		}
		if fails > 0 {
			t.Errorf("max_model_len %s -> %s: %d of %d polls failed (want none)", c.from, c.to, fails, len(polls))
		}
		mustCode(t, "plan after max_model_len "+c.to, run("plan", "-detailed-exitcode"), exitOK)
		st := run("status")
		mustContain(t, "status after max_model_len "+c.to, st.stdout, "health    ok (/health 200)")
	}
}

// e2eBlueGreenServe is one serve of one GPU on the lab's cluster of 2
// GPUs a node: room for a second generation beside it (Ray's GPUs, and
// 2 × 0.4 of the GB10s' unified memory).
const e2eBlueGreenServe = e2eSparkCluster + `
vllm_serve "qwen" {
  cluster                = ray_cluster.spark
  model                  = "Qwen/Qwen3-0.6B"
  served_model_name      = "qwen"
  gpu_memory_utilization = 0.4
  max_model_len          = 2048
  port                   = 8000
  ready_timeout          = "2m"
}
`

// TestE2EBlueGreenFaults stops apply during a blue/green switch — kill -9,
// the client's connections lost — and checks that the next apply of the
// same configuration converges (exit 0, plan empty, the serve answers on
// its endpoint with the new max_model_len) and that nothing is lost: the
// serve's logs are there. The real Ray (the images need python3 for the
// front) with simnode's vLLM: the subject is the switch, not vLLM.
func TestE2EBlueGreenFaults(t *testing.T) {
	t.Parallel()
	for i, tc := range applyFaults(faultKill, faultConnLost) {
		t.Run(tc.name, func(t *testing.T) {
			l := startLab(t, fmt.Sprintf("rfe2ebgf%d", i), "-gpus", "2")
			dir := l.config(fmt.Sprintf(e2eBlueGreenServe, seedImage))
			twoGPUs(t, dir)
			run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }
			mustCode(t, "first apply", run("apply", "-auto-approve"), exitOK)
			setConfig(t, dir, "max_model_len          = 2048", "max_model_len          = 1024")
			mustContain(t, "plan", run("plan").stdout, "blue/green: no downtime")
			cmd, out := l.start("-chdir="+dir, "apply", "-auto-approve")
			waitFor(t, "apply to switch the endpoint", 5*time.Minute, func() bool {
				return strings.Contains(out.String(), "switching the endpoint of vllm serve qwen")
			})
			heal := tc.fault(t, l, cmd)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-exited:
			case <-time.After(3 * time.Minute):
				_ = cmd.Process.Kill()
				<-exited
				t.Logf("apply did not exit 3 min after the fault; killed")
			}
			heal()
			l.quiet(t)
			r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve", "-lock-timeout=1m")
			mustCode(t, "apply after the fault", r, exitOK)
			mustCode(t, "plan after it", run("plan", "-detailed-exitcode"), exitOK)
			mustContain(t, "status", run("status").stdout, "health    ok (/health 200)")
			logs := run("logs", "vllm_serve.qwen")
			mustContain(t, "logs", logs.stdout, "Application startup complete.")
			// One serve answers the endpoint: nothing of the interrupted
			// switch is left holding GPUs or the port.
			ps, _ := l.ssh("spark1", "docker exec rayform-spark sh -c 'ls /tmp/rayform/serve/'")
			if strings.Contains(ps, "serve-qwen.next.pid") {
				t.Errorf("a new generation's pid file is left:\n%s", ps)
			}
			t.Logf("after %s: apply %s; files %s", tc.name, r.elapsed.Round(time.Second), strings.Join(strings.Fields(ps), " "))
		})
	}
}

// stampLines watches out (an apply's output as it runs) for lines holding
// each of marks, and returns a function giving when each was first seen
// (to 50 ms): where a failed poll falls in the apply.
func stampLines(out *syncBuffer, marks ...string) func() map[string]time.Time {
	var mu sync.Mutex
	seen := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			s := out.String()
			mu.Lock()
			for _, m := range marks {
				if _, ok := seen[m]; !ok && strings.Contains(s, m) {
					seen[m] = time.Now()
				}
			}
			mu.Unlock()
		}
	}()
	return func() map[string]time.Time {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}
