// Package lock holds a per-cluster lock on a host for the length of an apply
// or destroy.
//
// The lock is a flock(1) held by a remote shell (the holder) whose stdin is
// an SSH channel. The lock file and its holder record live in
// ~/.rayform/locks on the host, a directory the SSH user owns and no one
// else may write; neither is followed through a symbolic link.
//
// The lock is a lease. The client renews it every [Options.Renew] by
// writing a line to the holder, which answers each one. The holder lets go
// when its stdin ends (Release, the process or its connection dying) or when
// no renewal arrived for [Options.Lease], so a client that vanished without
// its connection closing (packets dropped, then the process killed) holds
// the lock for at most one lease. Another Acquire breaks a holder whose
// record was not renewed for a lease (a holder that is wedged). On the
// client, a lock whose renewals go unanswered for half a lease, or whose
// channel ends, is lost: [Lock.Lost] is closed and [Lock.Err] names the
// cause, before the holder on the host could have let go by expiry.
package lock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/names"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// ErrHeld is returned when another process holds the lock.
var ErrHeld = errors.New("lock held")

// ErrLost is wrapped by [Lock.Err] once the lock is lost.
var ErrLost = errors.New("lock lost")

// DefaultLease is how long a holder keeps the lock without a renewal.
const DefaultLease = 30 * time.Second

// Dir is the directory holding the locks on a host, relative to the SSH
// user's home.
const Dir = ".rayform/locks"

// HeldError names the holder of a lock that could not be taken.
type HeldError struct {
	Host, Name string
	Holder     string // "who@machine pid=N rayform OP" as the holder wrote it
	// Identity is the deployment identity the holder took the lock for
	// (its Options.Identity), "" when the record names none (an earlier
	// rayform's).
	Identity string
	PID      int // the holder shell's pid on the host, 0 if unknown
	Since    time.Time
	// Renewed is how long ago the holder last renewed its lease, as the
	// host's clock says; negative when unknown.
	Renewed time.Duration
}

func (e *HeldError) Error() string {
	since := "unknown time"
	if !e.Since.IsZero() {
		since = e.Since.UTC().Format(time.RFC3339)
	}
	msg := fmt.Sprintf("lock %q on %s is held by %s since %s", e.Name, e.Host, e.Holder, since)
	if e.Renewed >= 0 {
		msg += fmt.Sprintf(" (lease renewed %s ago)", e.Renewed.Round(time.Second))
	}
	return msg
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Options tune Acquire.
type Options struct {
	// Holder describes this process, e.g. "alice@laptop pid=4242 rayform
	// apply"; it is what a second Acquire reports.
	Holder string
	// Lease is how long the lock outlives the last renewal; DefaultLease
	// when zero.
	Lease time.Duration
	// Renew is how often the lease is renewed; Lease/6 when zero.
	Renew time.Duration
	// Identity, when set, names the deployment identity the lock is taken
	// for (a lock.Name); the holder record carries it, and a HeldError
	// reports it. It tells apart two deployments that share a lock of a
	// LegacyName.
	Identity string
	// Wait is how long to keep trying while another holds the lock (the
	// -lock-timeout flag); zero fails at once.
	Wait time.Duration
	// Poll is how often a waiting Acquire tries again; a second when zero.
	Poll time.Duration
	// Broke, when set, is told the holder record of a stale lock that
	// Acquire broke.
	Broke func(record string)
	// Waiting, when set, is told each time the lock was found held and
	// Acquire will try again.
	Waiting func(*HeldError)
}

func (o Options) withDefaults() Options {
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Renew <= 0 {
		o.Renew = o.Lease / 6
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return o
}

// Lock is a held lock; Release it when done.
type Lock struct {
	host, name string
	stdin      *io.PipeWriter
	done       chan error // the holder's command, when it ends
	stop       chan struct{}
	lost       chan struct{}

	mu       sync.Mutex
	err      error // why the lock was lost
	released bool
	stopOnce sync.Once
}

// exitHeld is the remote script's exit status when the lock is taken.
const exitHeld = 75

// script takes the lock and holds it while renewals arrive on stdin. $1 is
// the lock name, $2 the holder description, $3 the lease in seconds. It
// prints one line: LOCKED, HELD <age> <record>, or BAD <reason>; a broken
// stale lock adds BROKE <record> before LOCKED. Every long-lived child
// closes fd 9 so that only this shell holds the lock.
const script = `n=$1 holder=$2 lease=$3
` + lockDirScript + `f="$d/$n.lock"
for p in "$f" "$f.holder"; do
  if [ -L "$p" ]; then echo "BAD $p is a symbolic link"; exit 1; fi
done
exec 9>>"$f" || exit 1
record() { printf '%s %s %s\n' "$$" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$holder" > "$f.holder.$$" && mv -f "$f.holder.$$" "$f.holder"; }
if ! flock -n 9; then
  r=$(cat "$f.holder" 2>/dev/null)
  age=-1
  m=$(stat -c %Y "$f.holder" 2>/dev/null) && age=$(( $(date +%s) - m ))
  pid=${r%% *}
  if [ "$age" -gt "$lease" ] && [ -n "$pid" ] && grep -q rayform-lock "/proc/$pid/cmdline" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null
    if flock -w 10 9; then
      echo "BROKE $r"
    else
      echo "HELD $age $r"; exit 75
    fi
  else
    echo "HELD $age $r"; exit 75
  fi
fi
record || exit 1
forget() { r=$(cat "$f.holder" 2>/dev/null); [ "${r%% *}" = "$$" ] && rm -f "$f.holder"; }
trap 'forget; exit 143' TERM
trap 'forget; exit 130' INT HUP
echo LOCKED
while l=$(exec timeout "$lease" head -n 1 9>&- 2>/dev/null) && [ "$l" = R ]; do
  touch -c "$f.holder"
  echo OK
done
forget
`

// Path returns the lock file of a lock name on the host, relative to the
// SSH user's home: the name made one path segment (names.Segment), so
// different names never share a lock file.
func Path(name string) string {
	return Dir + "/" + names.Segment(name) + ".lock"
}

func leaseSeconds(d time.Duration) string {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.Itoa(s)
}

// Acquire takes the lock called name on conn's host. While another holds
// it, Acquire tries again every opts.Poll for up to opts.Wait, then fails
// with a *HeldError naming the holder. The lock lasts until Release or ctx's
// cancellation (which give it up), or until it is lost: the connection's
// end or an unanswered renewal; watch Lost.
func Acquire(ctx context.Context, conn transport.Conn, name string, opts Options) (*Lock, error) {
	opts = opts.withDefaults()
	deadline := time.Now().Add(opts.Wait)
	for {
		l, err := acquireOnce(ctx, conn, name, opts)
		var held *HeldError
		if err == nil || !errors.As(err, &held) || !time.Now().Before(deadline) {
			return l, err
		}
		if opts.Waiting != nil {
			opts.Waiting(held)
		}
		t := time.NewTimer(min(opts.Poll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (gave up waiting: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

func acquireOnce(ctx context.Context, conn transport.Conn, name string, opts Options) (*Lock, error) {
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	l := &Lock{host: conn.Host(), name: name, stdin: stdinW, done: make(chan error, 1), stop: make(chan struct{}), lost: make(chan struct{})}
	cmd := transport.Cmd{
		Script: "sh -c " + shell.Quote(script) + " rayform-lock " + shell.Quote(names.Segment(name)) + " " +
			shell.Quote(holderRecord(opts)) + " " + leaseSeconds(opts.Lease),
		Stdin:    stdinR,
		Stdout:   outW,
		Mutating: true,
	}
	// Closing stdin is what ends the remote holder; do it when ctx ends too,
	// so that a transport waiting for its stdin copy is never left hanging.
	go func() {
		select {
		case <-ctx.Done():
		case <-l.stop:
		}
		stdinW.Close()
	}()
	go func() {
		_, err := conn.Run(ctx, cmd)
		outW.Close()
		stdinR.Close()
		l.done <- err
	}()
	out := bufio.NewReader(outR)
	var broke string
	for {
		line, readErr := out.ReadString('\n')
		line = strings.TrimSpace(line)
		switch {
		case line == "LOCKED":
			if broke != "" && opts.Broke != nil {
				opts.Broke(broke)
			}
			go l.hold(ctx, out, opts)
			return l, nil
		case strings.HasPrefix(line, "BROKE "):
			broke = strings.TrimPrefix(line, "BROKE ")
			continue
		case strings.HasPrefix(line, "HELD "):
			go io.Copy(io.Discard, out) //nolint:errcheck // drain until the command ends
			l.close()
			<-l.done
			return nil, parseHeld(conn.Host(), name, strings.TrimPrefix(line, "HELD "))
		case strings.HasPrefix(line, "BAD "):
			go io.Copy(io.Discard, out) //nolint:errcheck // drain until the command ends
			l.close()
			<-l.done
			return nil, fmt.Errorf("taking lock %q on %s: %s", name, conn.Host(), strings.TrimPrefix(line, "BAD "))
		}
		if readErr != nil || line != "" {
			go io.Copy(io.Discard, out) //nolint:errcheck // drain until the command ends
			l.close()
			err := <-l.done
			if err == nil {
				err = readErr
				if line != "" {
					err = fmt.Errorf("unexpected answer %q", line)
				}
			}
			return nil, fmt.Errorf("taking lock %q on %s: %w", name, conn.Host(), err)
		}
	}
}

// hold renews the lease until Release, and marks the lock lost when the
// holder's command ends or a renewal goes unanswered for half a lease.
func (l *Lock) hold(ctx context.Context, out *bufio.Reader, opts Options) {
	acks := make(chan struct{}, 1)
	go func() {
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				return
			}
			if strings.TrimSpace(line) == "OK" {
				select {
				case acks <- struct{}{}:
				default:
				}
			}
		}
	}()
	// Writes go through their own goroutine: a connection that stopped
	// moving data blocks the write, and the missing answers must still be
	// noticed.
	renew := make(chan struct{}, 1)
	writeErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-l.stop:
				return
			case <-renew:
			}
			if _, err := io.WriteString(l.stdin, "R\n"); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	tick := time.NewTicker(opts.Renew)
	defer tick.Stop()
	lastAck := time.Now()
	for {
		select {
		case <-l.stop:
			return
		case err := <-l.done:
			l.done <- err // for Release
			if ctx.Err() != nil {
				return // given up with ctx, as documented: not lost
			}
			if err == nil {
				err = errors.New("the holder exited")
			}
			l.markLost(fmt.Errorf("the SSH channel holding it ended: %w", err))
			return
		case <-acks:
			lastAck = time.Now()
		case <-tick.C:
			if since := time.Since(lastAck); since > opts.Lease/2 {
				l.markLost(fmt.Errorf("the host did not answer a lease renewal for %s", since.Round(time.Second)))
				l.close()
				return
			}
			select {
			case renew <- struct{}{}:
			default:
			}
		case err := <-writeErr:
			l.markLost(fmt.Errorf("renewing the lease: %w", err))
			l.close()
			return
		}
	}
}

func (l *Lock) markLost(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || l.err != nil {
		return
	}
	l.err = fmt.Errorf("%w: lock %q on %s: %w", ErrLost, l.name, l.host, cause)
	close(l.lost)
}

// Lost is closed when the lock is lost; Err says why.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err is nil while the lock is held, and wraps ErrLost with the cause once
// it is lost.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Lock) close() {
	l.stopOnce.Do(func() { close(l.stop) })
}

// identityMark starts the suffix of a holder record that names the
// deployment identity.
const identityMark = " [for "

// holderRecord is the holder text the lock's record carries.
func holderRecord(opts Options) string {
	if opts.Identity == "" {
		return opts.Holder
	}
	return opts.Holder + identityMark + opts.Identity + "]"
}

func parseHeld(host, name, text string) error {
	e := &HeldError{Host: host, Name: name, Holder: "another rayform", Renewed: -1}
	age, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
	if a, err := strconv.Atoi(age); err == nil && a >= 0 {
		e.Renewed = time.Duration(a) * time.Second
	}
	pid, rest, _ := strings.Cut(rest, " ")
	ts, holder, _ := strings.Cut(rest, " ")
	if p, err := strconv.Atoi(pid); err == nil {
		e.PID = p
	}
	if t, err := time.Parse(time.RFC3339, ts); err == nil {
		e.Since = t
		if i := strings.LastIndex(holder, identityMark); i >= 0 && strings.HasSuffix(holder, "]") {
			holder, e.Identity = holder[:i], holder[i+len(identityMark):len(holder)-1]
		}
		if holder != "" {
			e.Holder = holder
		}
	}
	return e
}

// Release gives the lock up and waits for the remote side to let go.
func (l *Lock) Release() error {
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	l.close()
	err := <-l.done
	var ee *transport.ExitError
	if errors.As(err, &ee) {
		return nil // the shell was cut off; the lock is gone with it
	}
	return err
}

// inspectScript prints the holder record of lock $1 as "HELD <age>
// <record>" when the lock is held, FREE otherwise. With $2 = break, it
// then stops a holder whose pid is $3.
const inspectScript = `n=$1 op=$2 want=$3
f="$HOME/.rayform/locks/$n.lock"
[ -L "$f" ] && { echo "BAD $f is a symbolic link"; exit 1; }
[ -e "$f" ] || { echo FREE; exit 0; }
if flock -n "$f" true; then echo FREE; exit 0; fi
r=$(cat "$f.holder" 2>/dev/null)
age=-1
m=$(stat -c %Y "$f.holder" 2>/dev/null) && age=$(( $(date +%s) - m ))
pid=${r%% *}
if [ "$op" = break ]; then
  if [ "$pid" != "$want" ] || ! grep -q rayform-lock "/proc/$pid/cmdline" 2>/dev/null; then echo "CHANGED $age $r"; exit 0; fi
  kill -9 "$pid" && flock -w 10 "$f" true && rm -f "$f.holder" && echo UNLOCKED && exit 0
  echo "HELD $age $r"; exit 0
fi
echo "HELD $age $r"
`

// Inspect reports who holds the lock called name on conn's host: nil when
// it is free, else a *HeldError.
func Inspect(ctx context.Context, conn transport.Conn, name string) error {
	return runInspect(ctx, conn, name, "inspect", 0)
}

// Break stops the holder of the lock called name on conn's host if it is
// still the process pid that Inspect reported, releasing the lock. It
// refuses (with a *HeldError naming the new holder) if the lock changed
// hands in between.
func Break(ctx context.Context, conn transport.Conn, name string, pid int) error {
	return runInspect(ctx, conn, name, "break", pid)
}

func runInspect(ctx context.Context, conn transport.Conn, name, op string, pid int) error {
	res, err := conn.Run(ctx, transport.Cmd{
		Script:   "sh -c " + shell.Quote(inspectScript) + " rayform-unlock " + shell.Quote(names.Segment(name)) + " " + op + " " + strconv.Itoa(pid),
		Mutating: op == "break",
		Timeout:  30 * time.Second,
	})
	line := strings.TrimSpace(string(res.Stdout))
	switch {
	case err != nil && !strings.HasPrefix(line, "BAD "):
		return fmt.Errorf("reading lock %q on %s: %w", name, conn.Host(), err)
	case line == "FREE" || line == "UNLOCKED":
		return nil
	case strings.HasPrefix(line, "HELD "):
		return parseHeld(conn.Host(), name, strings.TrimPrefix(line, "HELD "))
	case strings.HasPrefix(line, "CHANGED "):
		return fmt.Errorf("lock %q on %s changed hands; not breaking it: %w", name, conn.Host(), parseHeld(conn.Host(), name, strings.TrimPrefix(line, "CHANGED ")))
	case strings.HasPrefix(line, "BAD "):
		return fmt.Errorf("reading lock %q on %s: %s", name, conn.Host(), strings.TrimPrefix(line, "BAD "))
	}
	return fmt.Errorf("reading lock %q on %s: unexpected answer %q", name, conn.Host(), line)
}
