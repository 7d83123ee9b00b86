package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// Conn is the SSH connection to one host. Commands are sessions multiplexed
// on it, at most Options.MaxSessions at a time. It is safe for concurrent
// use.
type Conn struct {
	d   *Dialer
	r   Resolved
	log hclog.Logger

	sessions chan struct{} // semaphore for commands
	killers  chan struct{} // semaphore for kill sessions

	connectMu sync.Mutex // serialises (re)connecting
	mu        sync.Mutex // guards cl and closed
	cl        *client
	closed    bool

	handshakes atomic.Int64
	roundTrips atomic.Int64
}

var _ transport.Conn = (*Conn)(nil)

func newConn(d *Dialer, r Resolved) *Conn {
	return &Conn{
		d:        d,
		r:        r,
		log:      d.log.With("host", r.Name),
		sessions: make(chan struct{}, d.opts.MaxSessions),
		killers:  make(chan struct{}, 2),
	}
}

// Host returns the node name.
func (c *Conn) Host() string { return c.r.Name }

// Route returns the resolved settings the connection uses.
func (c *Conn) Route() Resolved { return c.r }

// Stats reports handshakes (the first one and reconnects) and round trips.
func (c *Conn) Stats() transport.Stats {
	return transport.Stats{Handshakes: int(c.handshakes.Load()), RoundTrips: int(c.roundTrips.Load())}
}

// Close closes the connection; jump host connections stay with the Dialer.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	cl := c.cl
	c.cl = nil
	c.mu.Unlock()
	c.d.forget(c)
	if cl != nil {
		cl.close()
		st := c.Stats()
		c.log.Debug("connection closed", "route", c.r.String(), "handshakes", st.Handshakes, "round_trips", st.RoundTrips)
	}
	return nil
}

func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// connect performs the handshake (through the jump hosts).
func (c *Conn) connect(ctx context.Context) error {
	cl, err := c.d.dialRoute(ctx, c.r, c.r.Name)
	if err != nil {
		return err
	}
	c.handshakes.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cl.close()
		return fmt.Errorf("%s: connection closed", c.r.Name)
	}
	c.cl = cl
	return nil
}

// client returns the live connection, reconnecting if the previous one is
// known to be gone. stale is a client that just failed to open a session:
// it is replaced.
func (c *Conn) client(ctx context.Context, stale *client) (*client, error) {
	c.connectMu.Lock()
	defer c.connectMu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: connection closed: %w", c.r.Name, transport.ErrDisconnected)
	}
	cl := c.cl
	c.mu.Unlock()
	if cl != nil && cl != stale && cl.alive() {
		return cl, nil
	}
	c.log.Debug("reconnecting")
	if cl != nil {
		cl.close()
	}
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl, nil
}

// session opens a session, reconnecting once if the connection dropped
// since the last command.
func (c *Conn) session(ctx context.Context) (*xssh.Session, error) {
	cl, err := c.client(ctx, nil)
	if err != nil {
		return nil, err
	}
	s, err := cl.NewSession()
	if err == nil {
		return s, nil
	}
	var refused *xssh.OpenChannelError
	if errors.As(err, &refused) {
		// The server refused the session (MaxSessions?) on a live
		// connection: reconnecting would not help.
		return nil, fmt.Errorf("%s: open session: %w", c.r.Name, err)
	}
	c.log.Debug("session failed on a dropped connection, reconnecting once", "error", err)
	cl, err = c.client(ctx, cl)
	if err != nil {
		return nil, err
	}
	s, err = cl.NewSession()
	if err != nil {
		return nil, fmt.Errorf("%s: open session after reconnect: %w: %v", c.r.Name, transport.ErrDisconnected, err)
	}
	return s, nil
}

// Run runs cmd on the host and waits for it. See the package wrapper
// protocol (wrapper.go) for how Env, cancellation and the exit status work.
func (c *Conn) Run(ctx context.Context, cmd transport.Cmd) (transport.Result, error) {
	line := cmd.String()
	if err := cmd.Validate(); err != nil {
		return transport.Result{}, fmt.Errorf("%s: %q: %w", c.r.Name, line, err)
	}
	c.roundTrips.Add(1)
	return c.run(ctx, cmd, line, line)
}

// run is Run after validation; what names the command in errors and logs.
func (c *Conn) run(ctx context.Context, cmd transport.Cmd, line, what string) (transport.Result, error) {
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return transport.Result{}, c.cmdError(what, ctxKind(ctx.Err()))
	}
	// The slot is held until the command's processes are gone (after a kill
	// too), so the server's session count stays under its MaxSessions.
	defer func() { <-c.sessions }()

	sess, err := c.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return transport.Result{}, c.cmdError(what, ctxKind(ctx.Err()))
		}
		return transport.Result{}, err
	}
	defer sess.Close()

	rc, err := c.start(sess, cmd, line)
	if err != nil {
		return transport.Result{}, c.cmdError(what, err)
	}
	quit := make(chan struct{})
	defer close(quit)
	go rc.feed(cmd, quit)

	werr, cancelled := c.wait(ctx, sess, rc.marker)
	rc.marker.flush()
	res := transport.Result{Stdout: rc.stdout.bytes(), Stderr: rc.stderr.bytes(), Duration: time.Since(rc.start)}
	return c.result(res, cmd, what, werr, cancelled)
}

// cmdError names the host and the command in err.
func (c *Conn) cmdError(what string, err error) error {
	return fmt.Errorf("%s: %q: %w", c.r.Name, shorten(what), err)
}

// remoteCmd is a command started under the wrapper in a session: its
// output as read so far, the wrapper's announcement, and its stdin, to
// which the environment goes first, up to terminator.
type remoteCmd struct {
	stdout, stderr *lockedTee
	marker         *markerWriter
	stdin          io.WriteCloser
	terminator     string
	start          time.Time
}

// start starts line under the wrapper in sess, its output teed to cmd's
// writers.
func (c *Conn) start(sess *xssh.Session, cmd transport.Cmd, line string) (*remoteCmd, error) {
	var stdout, stderr bytes.Buffer
	rc := &remoteCmd{
		stdout:     &lockedTee{buf: &stdout, w: cmd.Stdout},
		stderr:     &lockedTee{buf: &stderr, w: cmd.Stderr},
		terminator: "rayform-env-end-" + randomHex(12),
	}
	rc.marker = newMarkerWriter(rc.stderr)
	sess.Stdout = rc.stdout
	sess.Stderr = rc.marker
	stdin, err := sess.StdinPipe()
	if err != nil {
		return nil, err
	}
	rc.stdin = stdin
	rc.start = time.Now()
	if err := sess.Start(execString(line, rc.terminator, c.d.opts.KillGrace)); err != nil {
		return nil, fmt.Errorf("start: %w: %v", transport.ErrDisconnected, err)
	}
	return rc, nil
}

// feed sends the environment once the wrapper has announced itself, then
// the command's stdin, and closes it; it gives up when quit closes first.
func (rc *remoteCmd) feed(cmd transport.Cmd, quit <-chan struct{}) {
	select {
	case <-rc.marker.found:
	case <-quit:
		return
	}
	if _, err := rc.stdin.Write(envHeader(cmd.EnvKeys(), cmd.Env, rc.terminator)); err != nil {
		return
	}
	if cmd.Stdin != nil {
		_, _ = io.Copy(rc.stdin, cmd.Stdin)
	}
	_ = rc.stdin.Close()
}

// wait waits for the session to end, or for ctx: then it kills the
// command's processes, closes the session and waits (bounded) for its end.
// It returns the session's Wait error and, for a cancelled command, why.
func (c *Conn) wait(ctx context.Context, sess *xssh.Session, marker *markerWriter) (werr, cancelled error) {
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	select {
	case werr = <-waited:
	case <-ctx.Done():
		cancelled = ctx.Err()
		c.kill(marker)
		_ = sess.Close()
		// The channel is closed; its end normally follows at once. Do not
		// hang on a server that never acknowledges.
		t := time.NewTimer(c.d.opts.KillGrace + 5*time.Second)
		select {
		case werr = <-waited:
		case <-t.C:
		}
		t.Stop()
	}
	return werr, cancelled
}

// result completes res with the command's exit status and returns it with
// the error Run reports: the context's for a cancelled command,
// ErrDisconnected when no exit status came, an *ExitError for a non-zero
// one.
func (c *Conn) result(res transport.Result, cmd transport.Cmd, what string, werr, cancelled error) (transport.Result, error) {
	var ee *xssh.ExitError
	switch {
	case cancelled != nil:
		res.ExitCode = -1
		c.log.Debug("run cancelled", "cmd", what, "env", cmd.EnvKeys(), "duration", res.Duration, "reason", cancelled)
		return res, c.cmdError(what, ctxKind(cancelled))
	case werr == nil:
	case errors.As(werr, &ee):
		res.ExitCode = ee.ExitStatus()
		if sig := ee.Signal(); sig != "" {
			res.ExitCode = 128 + int(unix.SignalNum("SIG"+sig))
		}
	default:
		// No exit status: the connection (or the session) went away.
		res.ExitCode = -1
		c.log.Debug("run lost", "cmd", what, "error", werr)
		return res, c.cmdError(what, fmt.Errorf("%w while the command ran: %v", transport.ErrDisconnected, werr))
	}
	c.log.Debug("run", "cmd", what, "mutating", cmd.Mutating, "env", cmd.EnvKeys(), "exit", res.ExitCode, "duration", res.Duration, "round_trips", c.roundTrips.Load())
	if res.ExitCode != 0 {
		return res, &transport.ExitError{Host: c.r.Name, Cmd: what, Result: res}
	}
	return res, nil
}

// kill ends a cancelled command's processes through a second session. If
// the wrapper has not announced itself, the command has not started (it
// waits for the environment, which is never sent) and closing the session
// ends the wrapper.
func (c *Conn) kill(marker *markerWriter) {
	pid, pgid, ok := marker.ids()
	if !ok {
		return
	}
	c.killers <- struct{}{}
	defer func() { <-c.killers }()
	grace := c.d.opts.KillGrace
	ctx, cancel := context.WithTimeout(context.Background(), grace+c.d.opts.HandshakeTimeout)
	defer cancel()
	cl, err := c.client(ctx, nil)
	if err != nil {
		c.log.Warn("cannot kill cancelled command", "pid", pid, "error", err)
		return
	}
	s, err := cl.NewSession()
	if err != nil {
		c.log.Warn("cannot kill cancelled command", "pid", pid, "error", err)
		return
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() { done <- s.Run("exec /bin/sh -c " + shell.Quote(killScript(pid, pgid, grace))) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.log.Debug("killed cancelled command", "pid", pid, "pgid", pgid, "error", err)
}

// Upload writes data to path atomically: the wrapper writes stdin to a temp
// file in the same directory, sets the mode and renames it over path.
func (c *Conn) Upload(ctx context.Context, path string, data []byte, mode uint32) error {
	c.roundTrips.Add(1)
	what := "upload " + path
	script := uploadScript(path, mode)
	_, err := c.run(ctx, transport.Cmd{Script: script, Stdin: bytes.NewReader(data), Mutating: true}, script, what)
	return err
}

// ctxKind adds transport.ErrTimeout to a deadline.
func ctxKind(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, err)
	}
	return err
}

// lockedTee collects a stream and copies it to an optional writer.
type lockedTee struct {
	mu  sync.Mutex
	buf *bytes.Buffer
	w   io.Writer
}

func (t *lockedTee) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	return len(p), nil
}

func (t *lockedTee) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.Bytes()
}

func shorten(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
