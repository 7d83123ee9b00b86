package lock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
)

// fencedOnce sets up a host (setup) whose fence of lock p.main one run
// has advanced, and returns that fence.
func fencedOnce(t *testing.T) (conn transport.Conn, home, name string, f transport.Fence) {
	t.Helper()
	conn, home = setup(t)
	name = Name("p", "main")
	f, _, err := AdvanceFence(context.Background(), conn, name, false)
	if err != nil {
		t.Fatal(err)
	}
	return conn, home, name, f
}

// Issue 23, item 1: a command of a run that lost the lock fails on the
// host itself once the new holder advanced the fence, whenever it arrives.
func TestFenceRefusesAnEarlierHolder(t *testing.T) {
	conn, home, name, old := fencedOnce(t)
	ctx := context.Background()
	oldRun := transport.Guard(conn, func() error { return nil }, old)
	mark := func(file string) transport.Cmd {
		return transport.Cmd{Argv: []string{"touch", filepath.Join(home, file)}, Mutating: true}
	}
	if _, err := oldRun.Run(ctx, mark("before")); err != nil {
		t.Fatalf("the holder's own command: %v", err)
	}
	cur, _, err := AdvanceFence(ctx, conn, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Gen != old.Gen+1 {
		t.Fatalf("generation %d after %d, want one more", cur.Gen, old.Gen)
	}
	_, err = oldRun.Run(ctx, mark("after"))
	if !errors.Is(err, transport.ErrFenced) {
		t.Fatalf("the earlier holder's command after the fence moved = %v, want ErrFenced", err)
	}
	for _, want := range []string{`the lock "p.main" was taken by another rayform run`, "fence generation " + strconv.FormatUint(old.Gen, 10), "is now " + strconv.FormatUint(cur.Gen, 10)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "after")); err == nil {
		t.Fatal("the fenced command ran")
	}
	// Uploads are fenced too.
	if err := oldRun.Upload(ctx, filepath.Join(home, "up"), []byte("x"), 0o600); !errors.Is(err, transport.ErrFenced) {
		t.Fatalf("the earlier holder's upload = %v, want ErrFenced", err)
	}
	newRun := transport.Guard(conn, func() error { return nil }, cur)
	if _, err := newRun.Run(ctx, mark("new")); err != nil {
		t.Fatalf("the new holder's command: %v", err)
	}
	if err := newRun.Upload(ctx, filepath.Join(home, "up"), []byte("data"), 0o640); err != nil {
		t.Fatalf("the new holder's upload: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "up")); err != nil || string(b) != "data" {
		t.Fatalf("uploaded file = %q, %v", b, err)
	}
	if st, _ := os.Stat(filepath.Join(home, "up")); st.Mode().Perm() != 0o640 {
		t.Errorf("uploaded file mode %o, want 640", st.Mode().Perm())
	}
	// Another lock's fence is not this one's.
	other, _, err := AdvanceFence(ctx, conn, Name("p", "other"), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newRun.Run(ctx, mark("other")); err != nil || other.File == cur.File {
		t.Fatalf("another lock's fence moved this one (%v, files %s %s)", err, other.File, cur.File)
	}
	if fi, err := os.Stat(filepath.Join(home, transport.FenceDir, cur.File)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("fence file: %v, mode %v; want 0600", err, fi.Mode())
	}
}

// The fence is held shared while a fenced command runs (so advancing it
// waits for that command), and not by what the command leaves running.
func TestFenceHeldOnlyWhileTheCommandRuns(t *testing.T) {
	conn, home := setup(t)
	ctx := context.Background()
	name := Name("p", "main")
	f, _, err := AdvanceFence(ctx, conn, name, false)
	if err != nil {
		t.Fatal(err)
	}
	fenceFile := filepath.Join(home, transport.FenceDir, f.File)
	locked := func() bool {
		return exec.Command("flock", "-n", "-x", fenceFile, "true").Run() != nil
	}
	g := transport.Guard(conn, func() error { return nil }, f)
	// A command that checks from inside that the fence is locked, and
	// leaves a process running as `docker run -d` does.
	pidFile := filepath.Join(home, "pid")
	script := `if flock -n -x "$1" true; then echo "not locked while running"; exit 1; fi
sleep 300 </dev/null >/dev/null 2>&1 &
echo $! > "$2"`
	if res, err := g.Run(ctx, transport.Cmd{Argv: []string{"sh", "-c", script, "x", fenceFile, pidFile}, Mutating: true}); err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	defer syscall.Kill(pid, syscall.SIGKILL)
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the started process is not running")
	}
	if locked() {
		t.Fatal("the process the fenced command started holds the fence")
	}
	if _, _, err := AdvanceFence(ctx, conn, name, false); err != nil {
		t.Fatalf("advancing while the started process runs: %v", err)
	}
}

// Issue 23, item 3: the lock names of two deployments never coincide.
func TestNamesTellDeploymentsApart(t *testing.T) {
	pairs := [][2]string{
		{"hb-x", "spark"}, {"hb", "x-spark"}, {"hb", "x.spark"}, {"hb.x", "spark"},
		{"a", "b-c"}, {"a-b", "c"}, {"a.b", "c"}, {"a", "b c"}, {"a", "b_c"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		n := Name(p[0], p[1])
		if o, ok := seen[Path(n)]; ok {
			t.Errorf("%v and %v share the lock %s", o, p, Path(n))
		}
		seen[Path(n)] = p
		if FenceFile(n) == FenceFile(LegacyName(p[0], p[1])) {
			t.Errorf("%v: new and legacy names share a fence", p)
		}
	}
	if got := Name("hb-x", "spark"); got != "hb-x.spark" {
		t.Errorf("Name = %q, want hb-x.spark", got)
	}
	if got := LegacyName("dgx-spark-pair", "spark"); Path(got) != Dir+"/dgx-spark-pair-spark.lock" {
		t.Errorf("the legacy lock moved: %s", Path(got))
	}
}

// A holder record names the identity the lock was taken for, so that a
// legacy name two deployments share tells them apart.
func TestHeldNamesTheIdentity(t *testing.T) {
	conn, _ := setup(t)
	ctx := context.Background()
	l, err := Acquire(ctx, conn, LegacyName("hb-x", "spark"), Options{Holder: "alice@laptop pid=1 rayform apply", Identity: Name("hb-x", "spark")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	var held *HeldError
	if err := Inspect(ctx, conn, LegacyName("hb", "x-spark")); !errors.As(err, &held) {
		t.Fatalf("Inspect = %v, want held", err)
	}
	if held.Identity != "hb-x.spark" || held.Holder != "alice@laptop pid=1 rayform apply" {
		t.Errorf("holder %q for %q, want alice's for hb-x.spark", held.Holder, held.Identity)
	}
}

// A fenced command's failure names the command, not the script around it.
func TestFencedFailureNamesTheCommand(t *testing.T) {
	conn, _ := setup(t)
	ctx := context.Background()
	f, _, err := AdvanceFence(ctx, conn, Name("p", "main"), false)
	if err != nil {
		t.Fatal(err)
	}
	g := transport.Guard(conn, func() error { return nil }, f)
	_, err = g.Run(ctx, transport.Cmd{Argv: []string{"sh", "-c", "echo no such container >&2; exit 3"}, Mutating: true})
	var ee *transport.ExitError
	if !errors.As(err, &ee) || ee.Result.ExitCode != 3 || ee.Cmd != `sh -c 'echo no such container >&2; exit 3'` || errors.Is(err, transport.ErrFenced) {
		t.Fatalf("error %v (%#v), want exit 3 of the command itself", err, ee)
	}
	if !strings.Contains(err.Error(), "no such container") || strings.Contains(err.Error(), "rayform-fenced") {
		t.Errorf("error %q", err)
	}
}

// Issue 30, item 5: a command of an earlier holder that still runs under
// the fence — an orphan, whose client was killed and whose SSH session did
// not end it — is ended by the next holder's AdvanceFence, with its
// process group, and named (pid and command line), instead of making the
// next run wait 60 s for it and fail. Before, AdvanceFence failed after
// 60 s with "a command of an earlier holder of the lock has run on this
// host for more than 60 s".
func TestAdvanceEndsAnEarlierGenerationsOrphan(t *testing.T) {
	conn, home, name, old := fencedOnce(t)
	ctx := context.Background()
	started := filepath.Join(home, "started")
	line := "cd " + home + " && echo $$ > started.tmp && mv started.tmp started && exec sleep 300"
	script, err := transport.FencedScript([]transport.Fence{old}, line)
	if err != nil {
		t.Fatal(err)
	}
	// The orphan: a fenced command in a session of its own, as sshd runs
	// one, that nobody waits for but this test (to reap it).
	orphan := exec.Command("sh", "-c", script)
	orphan.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	defer syscall.Kill(-orphan.Process.Pid, syscall.SIGKILL)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphan never started")
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline
	}
	b, _ := os.ReadFile(started)
	inner, _ := strconv.Atoi(strings.TrimSpace(string(b)))

	cur, ended, err := AdvanceFence(ctx, conn, name, false)
	if err != nil {
		t.Fatalf("advancing past the orphan: %v", err)
	}
	if cur.Gen != old.Gen+1 {
		t.Errorf("generation %d after %d", cur.Gen, old.Gen)
	}
	if len(ended) != 1 || ended[0].PID != orphan.Process.Pid || !strings.Contains(ended[0].Command, "exec sleep 300") {
		t.Fatalf("ended %v, want the orphan (pid %d, its command line)", ended, orphan.Process.Pid)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Error("the orphan exited 0")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the orphan still runs 30 s after it was ended")
	}
	// Its command (the sleep it became) ended with it: the whole group.
	for running(inner) {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("the orphan's command (pid %d) still runs", inner)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline
	}
	if fencedMarkName := strings.ReplaceAll(strings.Trim(fencedMark, "*"), `"`, ""); fencedMarkName != transport.FencedName {
		t.Errorf("fencedMark %s does not match %s", fencedMark, transport.FencedName)
	}
}

// running reports whether pid is a process that has not ended (a zombie
// has).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
