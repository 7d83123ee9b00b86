package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked is wrapped by the error of [Lock] when another run holds the
// state file's lock.
var ErrLocked = errors.New("state locked")

// Lock takes the local lock of the state file at path (an flock on
// path+".lock", which records the holder) for the length of an apply or
// destroy, so that two runs sharing a state file never interleave: the
// second fails naming the first, or waits up to wait for it. The kernel
// drops the lock when the process ends, however it ends. The lock file is
// never followed through a symbolic link.
func Lock(path, holder string, wait time.Duration) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("locking state: %w", err)
	}
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking state: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking state %s: %w", name, err)
		}
		if !time.Now().Before(deadline) {
			b, _ := os.ReadFile(name)
			f.Close()
			who := strings.TrimSpace(string(b))
			if who == "" {
				who = "another rayform"
			}
			return nil, fmt.Errorf("%w: %s is held by %s", ErrLocked, name, who)
		}
		time.Sleep(min(200*time.Millisecond, time.Until(deadline)))
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "%s since %s\n", holder, time.Now().UTC().Format(time.RFC3339))
	}
	return func() {
		f.Truncate(0)
		f.Close()
	}, nil
}
