package memledger

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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

// A killed process not yet reaped (a zombie) holds no memory: its entry
// does not count, as a dead CUDA process's device memory is freed.
func TestLedgerIgnoresZombies(t *testing.T) {
	l := At(t.TempDir())
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("cannot run sleep:", err)
	}
	pid := cmd.Process.Pid
	if err := l.Set(Entry{PID: pid, SysMiB: 4096, Command: "worker"}); err != nil {
		t.Fatal(err)
	}
	if got := l.SysMiB(); got != 4096 {
		t.Fatalf("running process: SysMiB = %d, want 4096", got)
	}
	_ = cmd.Process.Kill()
	// Not reaped yet: wait until the kernel shows it as a zombie.
	zombie := false
	for range 500 {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(b), ") Z ") {
			zombie = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !zombie {
		t.Skip("the killed process never showed as a zombie")
	}
	if got := l.SysMiB(); got != 0 {
		t.Errorf("zombie: SysMiB = %d, want 0", got)
	}
	_ = cmd.Wait()
}
