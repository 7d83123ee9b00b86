//go:build linux

package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EInterruptedRunsConverge stops an apply from nothing in every way
// a client can stop — kill -9 as each step starts, and Ctrl-C twice — and
// checks each time that the next apply converges, plan then has no
// changes, and no lock is left behind (issue 12, "Done when").
func TestE2EInterruptedRunsConverge(t *testing.T) {
	// Fast mode: the subject is that rayform converges after its own
	// process is stopped at each step (state, locks, the next apply), not
	// what Ray does at those steps.
	//
	// Every case starts from nothing, so each has its own lab (labFor)
	// and the cases run side by side.
	t.Parallel()
	labs := 0
	labFor := func(t *testing.T) (*e2eLab, string) {
		labs++
		l := startLab(t, fmt.Sprintf("rfe2ekill%d", labs), fastRay...)
		return l, l.config(clusterConfig("enp1s0f1np1", seedImage, false, 0.85))
	}
	converge := func(t *testing.T, l *e2eLab, dir string) {
		t.Helper()
		// The killed client's connection closes at once, and its locks
		// with it; the wait only covers sshd noticing.
		r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve", "-lock-timeout=1m")
		mustCode(t, "apply after the interruption", r, exitOK)
		mustCode(t, "plan after the interruption", l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode"), exitOK)
	}
	// stopAt starts an apply from nothing and stops it with sig(s) as soon
	// as step starts.
	stopAt := func(t *testing.T, l *e2eLab, dir, step string, sigs ...os.Signal) string {
		t.Helper()
		mustCode(t, "destroy before", l.rayform("", "-chdir="+dir, "destroy", "-auto-approve", "-lock-timeout=1m"), exitOK)
		cmd, out := l.start("-chdir="+dir, "apply", "-auto-approve")
		waitFor(t, "step "+step, 2*time.Minute, func() bool { return strings.Contains(out.String(), ": "+step) })
		for _, sig := range sigs {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
		if err := cmd.Wait(); err == nil {
			t.Fatalf("an apply stopped at %q exited 0\n%s", step, out)
		}
		return out.String()
	}
	for _, step := range []string{"image ", "check that", "start ray head", "reach the GCS", "start ray workers", "verify Ray's node table", "start vllm serve", "test a completion"} {
		t.Run("kill -9 at "+strings.TrimSpace(step), func(t *testing.T) {
			l, dir := labFor(t)
			stopAt(t, l, dir, step, syscall.SIGKILL)
			converge(t, l, dir)
		})
	}
	// faultAt starts an apply from nothing and runs fault as soon as step
	// starts; the apply must fail naming what, then the next converges.
	faultAt := func(t *testing.T, l *e2eLab, dir, step string, fault func(), what string) {
		t.Helper()
		mustCode(t, "destroy before", l.rayform("", "-chdir="+dir, "destroy", "-auto-approve", "-lock-timeout=1m"), exitOK)
		cmd, out := l.start("-chdir="+dir, "apply", "-auto-approve")
		waitFor(t, "step "+step, 2*time.Minute, func() bool { return strings.Contains(out.String(), ": "+step) })
		fault()
		if err := cmd.Wait(); err == nil {
			t.Fatalf("apply exited 0 after the fault at %q\n%s", step, out)
		}
		mustContain(t, "apply hit by the fault", out.String(), what)
	}
	t.Run("worker powers off during Ray start and comes back", func(t *testing.T) {
		l, dir := labFor(t)
		labOp := func(op string) {
			if o, err := l.rflab(op, "-name", l.name, "spark2").CombinedOutput(); err != nil {
				t.Fatalf("lab %s spark2: %v\n%s", op, err, o)
			}
		}
		faultAt(t, l, dir, "start ray workers", func() { labOp("poweroff") }, "spark2")
		labOp("poweron")
		converge(t, l, dir)
	})
	t.Run("head container killed while the serve loads", func(t *testing.T) {
		l, dir := labFor(t)
		faultAt(t, l, dir, "start vllm serve", func() {
			if o, err := l.ssh("spark1", "docker kill rayform-spark"); err != nil {
				t.Fatalf("docker kill: %v\n%s", err, o)
			}
		}, "vllm_serve.qwen")
		converge(t, l, dir)
	})
	t.Run("Ctrl-C twice", func(t *testing.T) {
		l, dir := labFor(t)
		// Two SIGINTs sent at once may arrive as one (signals do not
		// queue): the second goes after the first is acknowledged, while
		// the serve start, which the first lets finish, still runs. A run
		// that finished in between is tried again.
		for attempt := 1; ; attempt++ {
			mustCode(t, "destroy before", l.rayform("", "-chdir="+dir, "destroy", "-auto-approve", "-lock-timeout=1m"), exitOK)
			cmd, out := l.start("-chdir="+dir, "apply", "-auto-approve")
			waitFor(t, "the serve to start", 2*time.Minute, func() bool { return strings.Contains(out.String(), ": start vllm serve") })
			cmd.Process.Signal(os.Interrupt)
			waitFor(t, "the first interrupt to be acknowledged", time.Minute, func() bool { return strings.Contains(out.String(), "Gracefully shutting down...") })
			second := cmd.Process.Signal(os.Interrupt)
			err := cmd.Wait()
			if second != nil || !strings.Contains(out.String(), "Two interrupts received.") {
				if attempt < 3 {
					continue
				}
				t.Fatalf("the second interrupt never arrived while the apply ran (%v)\n%s", second, out)
			}
			if err == nil {
				t.Fatalf("an apply interrupted twice exited 0\n%s", out)
			}
			// An interrupt is no failure to classify (issue 22, item 6).
			mustContain(t, "apply interrupted twice", out.String(), "Error: apply interrupted")
			for _, bad := range []string{"context canceled", "failure patterns", "output.endpoint"} {
				if strings.Contains(out.String(), bad) {
					t.Errorf("an apply interrupted twice printed %q\n%s", bad, out)
				}
			}
			break
		}
		converge(t, l, dir)
	})
}
