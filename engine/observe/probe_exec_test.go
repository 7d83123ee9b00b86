package observe

import (
	"os"
	"syscall"
	"testing"
)

// checkExecFacts compares the probe's exec section with what this process
// is told by the kernel: the page size and the stack limit exactly, and
// an environment at least as large as the PATH the probe ran with.
func checkExecFacts(t *testing.T, e Exec, dir string) {
	t.Helper()
	if !has(dir, "getconf") || !has(dir, "env") {
		if e.Known() && e.EnvBytes > 0 {
			t.Errorf("without getconf or env: exec facts %+v", e)
		}
		return
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rl); err != nil {
		t.Fatal(err)
	}
	want := int64(-1)
	if rl.Cur != ^uint64(0) {
		want = int64(rl.Cur / 1024)
	}
	if e.Err != "" || e.PageSize != os.Getpagesize() || e.StackKiB != want {
		t.Errorf("exec facts %+v, want page size %d, stack %d KiB", e, os.Getpagesize(), want)
	}
	if path := len("PATH=") + len(dir) + 1; e.EnvBytes < path || e.EnvCount < 1 {
		t.Errorf("exec facts %+v: environment smaller than its PATH (%d bytes)", e, path)
	}
}

// TestExecArgMax is the kernel's rule (fs/exec.c, bprm_stack_limits): a
// quarter of the stack limit, at most 6 MiB, at least ARG_MAX (128 KiB).
func TestExecArgMax(t *testing.T) {
	tests := []struct {
		stackKiB int64
		want     int
	}{
		{8192, 2 * 1024 * 1024},
		{-1, 6 * 1024 * 1024},
		{65536, 6 * 1024 * 1024},
		{256, 128 * 1024},
		{1024, 256 * 1024},
	}
	for _, tt := range tests {
		if got := (Exec{PageSize: 4096, StackKiB: tt.stackKiB}).ArgMax(); got != tt.want {
			t.Errorf("stack %d KiB: ArgMax %d, want %d", tt.stackKiB, got, tt.want)
		}
	}
	if got := (Exec{PageSize: 65536}).MaxArgStrlen(); got != 2*1024*1024 {
		t.Errorf("64 KiB pages: MaxArgStrlen %d", got)
	}
}

// TestListenOwners: the listen.owner section's "PID NAME" lines name the
// container of each listener with that PID, and no other.
func TestListenOwners(t *testing.T) {
	f := &HostFacts{Listening: ListenFacts{List: []Listener{{Port: 8265, PID: 42}, {Port: 6379, PID: 7}, {Port: 22}}}}
	setListenOwners(f, parseListenOwners(&section{stdout: []byte("42 rayform-spark\nnot a line\n\n")}))
	if got := []string{f.Listening.List[0].Container, f.Listening.List[1].Container, f.Listening.List[2].Container}; got[0] != "rayform-spark" || got[1] != "" || got[2] != "" {
		t.Errorf("owners %q", got)
	}
}
