//go:build linux

package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2ELabExecForwardsSignals is issue 33 item 7: Ctrl-C (SIGINT) or
// SIGTERM to `rayform lab exec` (now `rflab exec`) killed the command it ran (its context's
// SIGKILL: "Error: signal: killed") instead of letting it cancel. Now lab
// exec passes the signal to the command's process group and waits: the
// command's own handler runs, and lab exec exits with the command's code.
func TestE2ELabExecForwardsSignals(t *testing.T) {
	t.Parallel()
	// Fast mode: the subject is lab exec's signal handling, not Ray.
	l := startLab(t, "rfe2elxs", fastRay...)
	for _, tt := range []struct {
		name string
		sig  syscall.Signal
		trap string
		code int
	}{
		{"SIGINT", syscall.SIGINT, "INT", 3},
		{"SIGTERM", syscall.SIGTERM, "TERM", 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			script := "trap 'echo cancelled cleanly; exit " + string(rune('0'+tt.code)) + "' " + tt.trap + "; echo ready; while :; do sleep 0.1; done"
			for _, node := range []string{"client", "spark1"} {
				cmd := l.rflab("exec", "-name", l.name, node, "--", "sh", "-c", script)
				out := &syncBuffer{}
				cmd.Stdout, cmd.Stderr = out, out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the command to start on "+node, 30*time.Second, func() bool { return strings.Contains(out.String(), "ready") })
				if err := cmd.Process.Signal(tt.sig); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				var err error
				select {
				case err = <-done:
				case <-time.After(30 * time.Second):
					cmd.Process.Kill()
					t.Fatalf("%s: lab exec did not end after %s:\n%s", node, tt.name, out.String())
				}
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != tt.code {
					t.Errorf("%s: lab exec ended with %v, want exit %d (the command's)\n%s", node, err, tt.code, out.String())
				}
				if !strings.Contains(out.String(), "cancelled cleanly") || strings.Contains(out.String(), "signal: killed") {
					t.Errorf("%s: the command did not cancel itself:\n%s", node, out.String())
				}
			}
		})
	}
}
