package lock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

// setup gives the test its own home (where the locks live on the "host")
// and a local connection standing for the head.
func setup(t *testing.T) (transport.Conn, string) {
	t.Helper()
	for _, tool := range []string{"flock", "timeout", "stat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	return local.New(local.Options{Host: "spark1"}), home
}

// holderPID reads the holder shell's pid from the holder record.
func holderPID(t *testing.T, home, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, Path(name)+".holder"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatalf("holder record %q: %v", b, err)
	}
	return pid
}

func TestSecondHolderFailsNamingTheFirst(t *testing.T) {
	conn, home := setup(t)
	ctx := context.Background()

	first, err := Acquire(ctx, conn, "p-main", Options{Holder: "alice@laptop pid=1 rayform destroy"})
	if err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	_, err = Acquire(ctx, conn, "p-main", Options{Holder: "bob@desk pid=2 rayform apply"})
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire = %v, want a *HeldError", err)
	}
	if held.Holder != "alice@laptop pid=1 rayform destroy" || held.Since.IsZero() || held.Host != "spark1" || held.PID == 0 || held.Renewed < 0 {
		t.Fatalf("HeldError = %+v, want alice's holder line, a time, the host, the holder's pid and its lease age", held)
	}
	if !strings.Contains(err.Error(), "alice@laptop pid=1 rayform destroy since") {
		t.Fatalf("message %q does not name the holder and since when", err)
	}
	if err := Inspect(ctx, conn, "p-main"); !errors.As(err, &held) || held.Holder != "alice@laptop pid=1 rayform destroy" {
		t.Fatalf("Inspect of a held lock = %v", err)
	}
	// The lock lives in a directory only the SSH user may enter.
	for _, d := range []string{filepath.Join(home, ".rayform"), filepath.Join(home, Dir)} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v; want 0700", d, err, fi.Mode().Perm())
		}
	}
	if err := first.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := first.Err(); err != nil {
		t.Errorf("a released lock reports lost: %v", err)
	}
	if err := Inspect(ctx, conn, "p-main"); err != nil {
		t.Fatalf("Inspect after Release = %v, want free", err)
	}
	again, err := Acquire(ctx, conn, "p-main", Options{Holder: "bob@desk pid=2 rayform apply"})
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if err := again.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestHolderCrashReleasesTheLock(t *testing.T) {
	conn, _ := setup(t)
	// The holder's session is cut off (its context ends, as when rayform
	// dies and its SSH connection drops): the remote shell exits and the
	// kernel releases the lock.
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Acquire(ctx, conn, "p-crash", Options{Holder: "crashy pid=3 rayform apply"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	l.Release() // waits for the holder to end
	if err := l.Err(); err != nil {
		t.Errorf("a lock given up with its context reports lost: %v", err)
	}
	next, err := Acquire(context.Background(), conn, "p-crash", Options{Holder: "next pid=4 rayform apply"})
	if err != nil {
		t.Fatalf("lock not released after the holder's session ended: %v", err)
	}
	next.Release()
}

// Finding 1: the channel holding the lock ends while the run goes on. The
// lock must say it is lost, naming the cause, instead of carrying on.
func TestLostWhenTheHolderDies(t *testing.T) {
	conn, home := setup(t)
	l, err := Acquire(context.Background(), conn, "p-lost", Options{Holder: "me pid=5 rayform apply"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := l.Err(); err != nil {
		t.Fatalf("fresh lock: %v", err)
	}
	if err := syscall.Kill(holderPID(t, home, "p-lost"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-l.Lost()
	if err := l.Err(); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "spark1") || !strings.Contains(err.Error(), "SSH channel holding it ended") {
		t.Fatalf("Err after the holder died = %v, want ErrLost naming the host and the cause", err)
	}
}

// Finding 2: a holder whose lease is not renewed lets go by itself after
// the lease (the client vanished but its connection did not close).
func TestUnrenewedLeaseExpires(t *testing.T) {
	conn, _ := setup(t)
	l, err := Acquire(context.Background(), conn, "p-expire", Options{Holder: "gone pid=6 rayform apply", Lease: time.Second, Renew: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	<-l.Lost() // the holder stopped waiting for renewals
	next, err := Acquire(context.Background(), conn, "p-expire", Options{Holder: "next pid=7 rayform apply"})
	if err != nil {
		t.Fatalf("the lock outlived its lease: %v", err)
	}
	next.Release()
}

// Finding 2: a wedged holder (stopped, so it neither renews nor lets go) is
// broken by the next Acquire once its record is older than the lease.
func TestStaleHolderIsBroken(t *testing.T) {
	conn, home := setup(t)
	ctx := context.Background()
	wedged, err := Acquire(ctx, conn, "p-stale", Options{Holder: "wedged pid=8 rayform apply", Renew: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer wedged.Release()
	pid := holderPID(t, home, "p-stale")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	// Within its lease it is held.
	if _, err := Acquire(ctx, conn, "p-stale", Options{Holder: "next pid=9 rayform apply"}); !errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire within the lease = %v, want held", err)
	}
	// Its record last renewed an hour ago, as the host's clock says.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(home, Path("p-stale")+".holder"), old, old); err != nil {
		t.Fatal(err)
	}
	var broke string
	next, err := Acquire(ctx, conn, "p-stale", Options{Holder: "next pid=9 rayform apply", Broke: func(r string) { broke = r }})
	if err != nil {
		t.Fatalf("Acquire of a stale lock: %v", err)
	}
	defer next.Release()
	if !strings.Contains(broke, "wedged pid=8 rayform apply") {
		t.Errorf("Broke told %q, want the stale holder's record", broke)
	}
	<-wedged.Lost()
}

// Finding 3: a planted symbolic link is refused, and its target untouched.
func TestSymlinkRefused(t *testing.T) {
	conn, home := setup(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{Path("p-link") + ".holder", Path("p-link")} {
		if err := os.Symlink(victim, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
		_, err := Acquire(context.Background(), conn, "p-link", Options{Holder: "me pid=10 rayform apply"})
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("Acquire with %s a symlink = %v, want a refusal", link, err)
		}
		os.Remove(filepath.Join(home, link))
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	// The same for a directory link in place of ~/.rayform.
	os.RemoveAll(filepath.Join(home, ".rayform"))
	if err := os.Symlink(t.TempDir(), filepath.Join(home, ".rayform")); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(context.Background(), conn, "p-link", Options{Holder: "me"}); err == nil || !strings.Contains(err.Error(), "not a directory owned by") {
		t.Errorf("Acquire with ~/.rayform a symlink = %v, want a refusal", err)
	}
}

// -lock-timeout: Acquire waits while the lock is held and takes it once
// released.
func TestWaitForTheLock(t *testing.T) {
	conn, _ := setup(t)
	ctx := context.Background()
	first, err := Acquire(ctx, conn, "p-wait", Options{Holder: "first"})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var waited *HeldError
	second, err := Acquire(ctx, conn, "p-wait", Options{Holder: "second", Wait: time.Minute, Poll: 10 * time.Millisecond,
		Waiting: func(h *HeldError) { once.Do(func() { waited = h; first.Release() }) }})
	if err != nil {
		t.Fatalf("waiting Acquire: %v", err)
	}
	second.Release()
	if waited == nil || waited.Holder != "first" {
		t.Errorf("Waiting told %+v, want the first holder", waited)
	}
}

// force-unlock: Break stops the holder Inspect named, and refuses a lock
// that changed hands.
func TestBreak(t *testing.T) {
	conn, _ := setup(t)
	ctx := context.Background()
	l, err := Acquire(ctx, conn, "p-break", Options{Holder: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	var held *HeldError
	if err := Inspect(ctx, conn, "p-break"); !errors.As(err, &held) {
		t.Fatalf("Inspect = %v", err)
	}
	if err := Break(ctx, conn, "p-break", held.PID+1); err == nil || !strings.Contains(err.Error(), "changed hands") {
		t.Errorf("Break of another pid = %v, want a refusal", err)
	}
	if err := Break(ctx, conn, "p-break", held.PID); err != nil {
		t.Fatalf("Break: %v", err)
	}
	<-l.Lost()
	if err := Inspect(ctx, conn, "p-break"); err != nil {
		t.Fatalf("Inspect after Break = %v, want free", err)
	}
}

// TestCancelLeavesNoHolderRecord is issue 33 item 8: after Ctrl-C (the
// holder's context cancelled, its command ended with SIGTERM) the holder
// record stayed beside the free lock.
func TestCancelLeavesNoHolderRecord(t *testing.T) {
	conn, home := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Acquire(ctx, conn, "p-cancel", Options{Holder: "ctrlc pid=5 rayform apply"})
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(home, Path("p-cancel")+".holder")
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("no holder record while held: %v", err)
	}
	cancel()
	l.Release()
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		b, _ := os.ReadFile(record)
		t.Errorf("holder record left after the cancelled holder ended: %q (%v)", b, err)
	}
}
