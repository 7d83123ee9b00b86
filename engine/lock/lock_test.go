package lock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport/local"
)

func requireFlock(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) not installed")
	}
}

func TestSecondHolderFailsNamingTheFirst(t *testing.T) {
	requireFlock(t)
	ctx := context.Background()
	name := "test-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000")
	t.Cleanup(func() { os.Remove(Path(name)) })
	conn := local.New(local.Options{Host: "spark1"})

	first, err := Acquire(ctx, conn, name, "alice@laptop pid=1 apply")
	if err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	_, err = Acquire(ctx, conn, name, "bob@desk pid=2 apply")
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire = %v, want a *HeldError", err)
	}
	if held.Holder != "alice@laptop pid=1 apply" || held.Since.IsZero() || held.Host != "spark1" {
		t.Fatalf("HeldError = %+v, want alice's holder line, a time and the host", held)
	}
	if !strings.Contains(err.Error(), "alice@laptop") || !strings.Contains(err.Error(), "since") {
		t.Fatalf("message %q does not name the holder and since when", err)
	}
	if err := first.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again, err := Acquire(ctx, conn, name, "bob@desk pid=2 apply")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if err := again.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestHolderCrashReleasesTheLock(t *testing.T) {
	requireFlock(t)
	name := "test-crash-" + time.Now().Format("150405.000000000")
	t.Cleanup(func() { os.Remove(Path(name)) })
	conn := local.New(local.Options{Host: "spark1"})

	// The holder's session is cut off (its context ends, as when rayform
	// dies and its SSH connection drops): the remote shell exits and the
	// kernel releases the lock.
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Acquire(ctx, conn, name, "crashy pid=3 apply")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-l.done
	next, err := Acquire(context.Background(), conn, name, "next pid=4 apply")
	if err != nil {
		t.Fatalf("lock not released after the holder's session ended: %v", err)
	}
	next.Release()
}
