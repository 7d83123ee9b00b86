package memledger

import (
	"os"
	"os/exec"
	"testing"
)

func TestLedgerCountsLiveProcesses(t *testing.T) {
	l := At(t.TempDir())
	me := os.Getpid()
	// A process that has exited: its entry must not count.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	dead := cmd.Process.Pid
	for _, e := range []Entry{
		{PID: me, Slot: 0, SysMiB: 1000, Command: "a"},
		{PID: me, Slot: 1, SysMiB: 500, GPU: 1, GPUMiB: 700, Command: "b"},
		{PID: dead, SysMiB: 99999, Command: "gone"},
	} {
		if err := l.Set(e); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.SysMiB(); got != 1500 {
		t.Errorf("SysMiB = %d, want 1500", got)
	}
	if got := l.GPUMiB(1); got != 700 {
		t.Errorf("GPUMiB(1) = %d, want 700", got)
	}
	if es := l.Entries(); len(es) != 2 || es[0].Command != "a" {
		t.Errorf("Entries = %+v", es)
	}
	l.Remove(me)
	if got := l.SysMiB(); got != 0 {
		t.Errorf("after Remove: SysMiB = %d", got)
	}
}
