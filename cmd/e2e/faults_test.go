//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// applyFault is one way a running apply is cut short: fault does it to
// the apply run by cmd on l and returns what undoes it (heal).
type applyFault struct {
	name  string
	fault func(t *testing.T, l *e2eLab, cmd *exec.Cmd) (heal func())
}

// The faults of the fault tests, by the name their subtests take.
const (
	faultKill      = "kill -9"
	faultInterrupt = "Ctrl-C twice"
	faultConnLost  = "connection lost"
)

// applyFaults returns the named faults, in the order given: the one table
// the fault tests of an interrupted apply draw from.
func applyFaults(names ...string) []applyFault {
	all := map[string]func(t *testing.T, l *e2eLab, cmd *exec.Cmd) func(){
		faultKill: func(t *testing.T, _ *e2eLab, cmd *exec.Cmd) func() {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			return func() {}
		},
		faultInterrupt: func(t *testing.T, _ *e2eLab, cmd *exec.Cmd) func() {
			for range 2 {
				if err := cmd.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
			}
			return func() {}
		},
		faultConnLost: func(t *testing.T, l *e2eLab, _ *exec.Cmd) func() {
			ports := l.clientPorts(t)
			if len(ports) == 0 {
				t.Fatal("no SSH connection of apply found")
			}
			l.dropRules(t, "-I", ports, "OUTPUT", "INPUT")
			return func() { l.dropRules(t, "-D", ports, "OUTPUT", "INPUT") }
		},
	}
	out := make([]applyFault, 0, len(names))
	for _, n := range names {
		f, ok := all[n]
		if !ok {
			panic("e2e: no fault " + n)
		}
		out = append(out, applyFault{name: n, fault: f})
	}
	return out
}
