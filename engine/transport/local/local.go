// Package local implements transport.Conn on this machine, for nodes whose
// host is "localhost". Commands run under /bin/sh -c exactly as the SSH
// transport runs them remotely, with the same contract: argv is quoted with
// shell.Join, Env reaches the process environment (never its argv), a
// non-zero exit is a *transport.ExitError, and ending ctx (or Cmd.Timeout)
// kills the command's whole process group.
//
// One difference remains: commands run in rayform's working directory,
// where SSH commands start in the login user's home. Use absolute paths.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rayform/rayform/engine/state/jsonfile"
	"github.com/rayform/rayform/engine/transport"
)

// DefaultKillGrace is how long a cancelled command has between SIGTERM and
// SIGKILL.
const DefaultKillGrace = 3 * time.Second

// Options configures a local connection. The zero value is usable.
type Options struct {
	// Host is the node name the connection reports; default "localhost".
	Host string
	// Shell runs every command as `Shell -c line`; default /bin/sh.
	Shell string
	// KillGrace is the time between SIGTERM and SIGKILL when a command is
	// cancelled; default DefaultKillGrace.
	KillGrace time.Duration
	// Logger receives one debug line per command; nil means no logging.
	Logger hclog.Logger
}

// Conn runs commands on this machine. It is safe for concurrent use.
type Conn struct {
	host      string
	shell     string
	killGrace time.Duration
	log       hclog.Logger

	roundTrips atomic.Int64
	closed     atomic.Bool
}

var _ transport.Conn = (*Conn)(nil)

// New returns a local connection.
func New(opts Options) *Conn {
	c := &Conn{host: opts.Host, shell: opts.Shell, killGrace: opts.KillGrace, log: opts.Logger}
	if c.host == "" {
		c.host = "localhost"
	}
	if c.shell == "" {
		c.shell = "/bin/sh"
	}
	if c.killGrace <= 0 {
		c.killGrace = DefaultKillGrace
	}
	if c.log == nil {
		c.log = hclog.NewNullLogger()
	}
	return c
}

// Dialer opens local connections; the host name is only recorded.
type Dialer struct {
	Options Options
}

var _ transport.Dialer = Dialer{}

// Dial returns a local connection named host.
func (d Dialer) Dial(ctx context.Context, host string) (transport.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: dial: %w", host, err)
	}
	o := d.Options
	o.Host = host
	return New(o), nil
}

// Host returns the node name.
func (c *Conn) Host() string { return c.host }

// Stats reports the commands and uploads issued; a local connection never
// handshakes.
func (c *Conn) Stats() transport.Stats {
	return transport.Stats{RoundTrips: int(c.roundTrips.Load())}
}

// Close marks the connection closed; later calls fail.
func (c *Conn) Close() error {
	if !c.closed.Swap(true) {
		c.log.Debug("connection closed", "host", c.host, "round_trips", c.roundTrips.Load())
	}
	return nil
}

func (c *Conn) errClosed(what string) error {
	return fmt.Errorf("%s: %s: connection closed: %w", c.host, what, transport.ErrDisconnected)
}

// Run runs cmd under the shell and waits for it.
func (c *Conn) Run(ctx context.Context, cmd transport.Cmd) (transport.Result, error) {
	line := cmd.String()
	if err := cmd.Validate(); err != nil {
		return transport.Result{}, fmt.Errorf("%s: %q: %w", c.host, line, err)
	}
	if c.closed.Load() {
		return transport.Result{}, c.errClosed(fmt.Sprintf("%q", line))
	}
	c.roundTrips.Add(1)
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return transport.Result{}, c.ctxError(line, err)
	}

	var stdout, stderr bytes.Buffer
	x, stdinPipe, err := c.command(cmd, line, &stdout, &stderr)
	if err != nil {
		return transport.Result{}, err
	}
	start := time.Now()
	if err := x.Start(); err != nil {
		return transport.Result{}, fmt.Errorf("%s: %q: start: %w", c.host, line, err)
	}
	if stdinPipe != nil {
		go func() {
			_, _ = io.Copy(stdinPipe, cmd.Stdin)
			_ = stdinPipe.Close()
		}()
	}
	werr, cancelled := c.wait(ctx, x)
	res := transport.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start)}
	if x.ProcessState != nil {
		res.ExitCode = exitCode(x.ProcessState)
	}
	c.log.Debug("run", "host", c.host, "cmd", line, "env", cmd.EnvKeys(), "exit", res.ExitCode, "duration", res.Duration)
	if cancelled != nil {
		return res, c.ctxError(line, cancelled)
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return res, fmt.Errorf("%s: %q: %w", c.host, line, werr)
	}
	if res.ExitCode != 0 {
		return res, &transport.ExitError{Host: c.host, Cmd: line, Result: res}
	}
	return res, nil
}

// command prepares line under the shell in a process group of its own,
// with cmd's environment, its output to stdout and stderr (and cmd's
// writers), and a pipe for cmd.Stdin when it has one.
func (c *Conn) command(cmd transport.Cmd, line string, stdout, stderr *bytes.Buffer) (*exec.Cmd, io.WriteCloser, error) {
	x := exec.Command(c.shell, "-c", line)
	x.Stdout = tee(stdout, cmd.Stdout)
	x.Stderr = tee(stderr, cmd.Stderr)
	// Stdin is copied by a goroutine Wait does not wait for: a command that
	// exits without reading all of a never-ending Stdin is finished, as over
	// SSH.
	var stdinPipe io.WriteCloser
	if cmd.Stdin != nil {
		var err error
		if stdinPipe, err = x.StdinPipe(); err != nil {
			return nil, nil, fmt.Errorf("%s: %q: stdin: %w", c.host, line, err)
		}
	}
	x.Env = os.Environ()
	for _, k := range cmd.EnvKeys() {
		x.Env = append(x.Env, k+"="+cmd.Env[k])
	}
	// Its own process group, so cancelling reaches every process the command
	// started, as sshd's setsid does for a remote command.
	x.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Once the command is gone, do not wait forever for a background child
	// that kept stdout open.
	x.WaitDelay = c.killGrace + time.Second
	return x, stdinPipe, nil
}

// wait waits for the started x, or for ctx: then it kills x's process
// group. It returns x's Wait error and, for a cancelled command, why.
func (c *Conn) wait(ctx context.Context, x *exec.Cmd) (werr, cancelled error) {
	waited := make(chan error, 1)
	go func() { waited <- x.Wait() }()
	select {
	case werr = <-waited:
	case <-ctx.Done():
		cancelled = ctx.Err()
		werr = c.kill(x.Process.Pid, waited)
	}
	return werr, cancelled
}

// kill ends the process group led by pid: SIGTERM, then SIGKILL after the
// grace period (also to stragglers that outlived the leader), and returns the
// leader's Wait error.
func (c *Conn) kill(pid int, waited <-chan error) error {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	timer := time.NewTimer(c.killGrace)
	defer timer.Stop()
	var werr error
	select {
	case werr = <-waited:
		// The leader is gone; make sure nothing else of the group survives.
		// The group id cannot be reused while members remain.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	case <-timer.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		werr = <-waited
	}
	return werr
}

func (c *Conn) ctxError(line string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %q: %w: %w", c.host, line, transport.ErrTimeout, err)
	}
	return fmt.Errorf("%s: %q: %w", c.host, line, err)
}

// Upload writes data to path atomically (jsonfile.Replace): a temp file in
// the same directory, written, chmodded and synced, then renamed over path.
func (c *Conn) Upload(ctx context.Context, path string, data []byte, mode uint32) (err error) {
	what := "upload " + path
	if c.closed.Load() {
		return c.errClosed(what)
	}
	c.roundTrips.Add(1)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w", c.host, what, err)
	}
	start := time.Now()
	defer func() {
		c.log.Debug("upload", "host", c.host, "path", path, "bytes", len(data), "mode", fmt.Sprintf("%04o", mode), "duration", time.Since(start), "error", err)
	}()
	if err := jsonfile.Replace(path, data, os.FileMode(mode&0o7777)); err != nil {
		return fmt.Errorf("%s: %s: %w", c.host, what, err)
	}
	return nil
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// tee returns buf, or a writer to both buf and w when w is set. Writes to w
// are serialised, as callers expect from one stream.
func tee(buf *bytes.Buffer, w io.Writer) io.Writer {
	if w == nil {
		return buf
	}
	return &lockedWriter{w: io.MultiWriter(buf, w)}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
