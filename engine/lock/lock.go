// Package lock holds a per-cluster lock on a host for the length of an apply
// or destroy. The lock is a flock(1) held by a remote shell whose stdin is
// the SSH session: when the holder releases it, exits or crashes, the
// session ends, the shell exits and the kernel drops the lock. No lock file
// can go stale.
package lock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// ErrHeld is returned when another process holds the lock.
var ErrHeld = errors.New("lock held")

// HeldError names the holder of a lock that could not be taken.
type HeldError struct {
	Host, Name string
	Holder     string // "who pid=N op" as the holder wrote it
	Since      time.Time
}

func (e *HeldError) Error() string {
	since := "unknown time"
	if !e.Since.IsZero() {
		since = e.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("lock %q on %s is held by %s since %s", e.Name, e.Host, e.Holder, since)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a held lock; Release it when done.
type Lock struct {
	stdin *io.PipeWriter
	done  chan error
}

// exitHeld is the remote script's exit status when the lock is taken.
const exitHeld = 75

// script takes the lock and holds it until stdin closes. $1 is the lock
// file, $2 the holder description.
const script = `f=$1
umask 077
exec 9>>"$f" || exit 1
if ! flock -n 9; then
  printf 'HELD %s\n' "$(cat "$f.holder" 2>/dev/null)"
  exit 75
fi
printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$2" > "$f.holder"
echo LOCKED
cat >/dev/null
rm -f "$f.holder"
`

// Path returns the lock file used for a lock name on the remote host.
func Path(name string) string {
	return "/tmp/rayform-" + sanitize(name) + ".lock"
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteRune('_')
		}
	}
	return b.String()
}

// Acquire takes the lock called name on conn's host, or fails at once with a
// *HeldError naming the holder. holder describes this process (e.g.
// "alice@laptop pid=4242 apply"). The lock lasts until Release, ctx's
// cancellation, or the connection's end.
func Acquire(ctx context.Context, conn transport.Conn, name, holder string) (*Lock, error) {
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	l := &Lock{stdin: stdinW, done: make(chan error, 1)}
	cmd := transport.Cmd{
		Script:   "sh -c " + shell.Quote(script) + " rayform-lock " + shell.Quote(Path(name)) + " " + shell.Quote(holder),
		Stdin:    stdinR,
		Stdout:   outW,
		Mutating: true,
	}
	// Closing stdin is what ends the remote holder; do it when ctx ends too,
	// so that a transport waiting for its stdin copy is never left hanging.
	go func() {
		<-ctx.Done()
		stdinW.Close()
	}()
	go func() {
		_, err := conn.Run(ctx, cmd)
		outW.Close()
		stdinR.Close()
		l.done <- err
	}()
	line, readErr := bufio.NewReader(outR).ReadString('\n')
	go io.Copy(io.Discard, outR) //nolint:errcheck // drain until the command ends
	line = strings.TrimSpace(line)
	switch {
	case line == "LOCKED":
		return l, nil
	case strings.HasPrefix(line, "HELD"):
		stdinW.Close()
		<-l.done
		return nil, parseHeld(conn.Host(), name, strings.TrimSpace(strings.TrimPrefix(line, "HELD")))
	}
	stdinW.Close()
	err := <-l.done
	if err == nil {
		err = readErr
	}
	return nil, fmt.Errorf("taking lock %q on %s: %w", name, conn.Host(), err)
}

func parseHeld(host, name, text string) error {
	e := &HeldError{Host: host, Name: name, Holder: "another rayform"}
	ts, rest, _ := strings.Cut(text, " ")
	if t, err := time.Parse(time.RFC3339, ts); err == nil {
		e.Since = t
		if rest != "" {
			e.Holder = rest
		}
	} else if text != "" {
		e.Holder = text
	}
	return e
}

// Release gives the lock up and waits for the remote side to let go.
func (l *Lock) Release() error {
	l.stdin.Close()
	err := <-l.done
	var ee *transport.ExitError
	if errors.As(err, &ee) {
		return nil // the shell was cut off; the lock is gone with it
	}
	return err
}
