// Package transporttest holds what tests need to exercise code written
// against engine/transport: a scripted, recording Fake connection and
// dialer; the conformance suite every transport.Conn implementation must
// pass (RunConformance); an in-process SSH server that really runs commands
// (NewSSHServer); and helpers that start a real OpenSSH sshd and ssh-agent.
package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// ErrUnexpected is returned (and the test failed) when a Fake receives a
// command no expectation matches, or a FakeDialer is asked for an unknown host.
var ErrUnexpected = errors.New("transporttest: unexpected command")

// Call is one command or upload a Fake received.
type Call struct {
	// Upload is true for an Upload; Path, Mode and Data describe it.
	Upload bool
	Path   string
	Mode   uint32
	Data   []byte

	// Cmd is the command as given (for a Run); Stdin holds what its Stdin
	// reader produced.
	Cmd   transport.Cmd
	Stdin []byte
}

// Line renders the call the way a transcript shows it: "$ <command>" for a
// read-only command, "! <command>" for a mutating one (with the names, never
// the values, of its environment), and "upload <path> <mode> (<n> bytes)".
func (c Call) Line() string {
	if c.Upload {
		return fmt.Sprintf("upload %s %04o (%d bytes)", c.Path, c.Mode, len(c.Data))
	}
	mark := "$"
	if c.Cmd.Mutating {
		mark = "!"
	}
	var env string
	if keys := c.Cmd.EnvKeys(); len(keys) > 0 {
		env = "[env " + strings.Join(keys, " ") + "] "
	}
	return mark + " " + env + c.Cmd.String()
}

// Matcher selects the commands an Expectation answers. It sees the command's
// shell line (transport.Cmd.String) and the whole Cmd.
type Matcher struct {
	desc  string
	match func(line string, cmd transport.Cmd) bool
}

func (m Matcher) String() string { return m.desc }

// Equal matches a command whose shell line is exactly line.
func Equal(line string) Matcher {
	return Matcher{"equal " + line, func(l string, _ transport.Cmd) bool { return l == line }}
}

// Argv matches a command with exactly this argv.
func Argv(argv ...string) Matcher {
	line := shell.Join(argv)
	return Matcher{"argv " + line, func(_ string, c transport.Cmd) bool {
		return len(c.Argv) > 0 && shell.Join(c.Argv) == line
	}}
}

// HasPrefix matches a command whose shell line starts with prefix.
func HasPrefix(prefix string) Matcher {
	return Matcher{"prefix " + prefix, func(l string, _ transport.Cmd) bool { return strings.HasPrefix(l, prefix) }}
}

// Contains matches a command whose shell line contains sub.
func Contains(sub string) Matcher {
	return Matcher{"contains " + sub, func(l string, _ transport.Cmd) bool { return strings.Contains(l, sub) }}
}

// Regexp matches a command whose shell line matches the regular expression
// pattern; it panics if pattern does not compile.
func Regexp(pattern string) Matcher {
	re := regexp.MustCompile(pattern)
	return Matcher{"regexp " + pattern, func(l string, _ transport.Cmd) bool { return re.MatchString(l) }}
}

// Any matches every command.
func Any() Matcher {
	return Matcher{"any", func(string, transport.Cmd) bool { return true }}
}

// Expectation is one scripted answer of a Fake. Build it with Fake.Expect
// and one of Return, ReturnResult, Fail, Err or Do.
type Expectation struct {
	match  Matcher
	result transport.Result
	err    error
	fn     func(ctx context.Context, cmd transport.Cmd, stdin []byte) (transport.Result, error)
	times  int // exact number of calls wanted; 0 means any
	used   int
}

// Return answers with exit status 0 and the given stdout.
func (e *Expectation) Return(stdout string) *Expectation {
	e.result = transport.Result{Stdout: []byte(stdout)}
	return e
}

// ReturnResult answers with r; a non-zero r.ExitCode makes Run return an
// *transport.ExitError as a real transport would.
func (e *Expectation) ReturnResult(r transport.Result) *Expectation {
	e.result = r
	return e
}

// Fail answers with the exit code and stderr (and an *transport.ExitError).
func (e *Expectation) Fail(code int, stderr string) *Expectation {
	e.result = transport.Result{ExitCode: code, Stderr: []byte(stderr)}
	return e
}

// Err answers with a transport error (for example one wrapping
// transport.ErrDisconnected) instead of running anything.
func (e *Expectation) Err(err error) *Expectation {
	e.err = err
	return e
}

// Do answers by calling fn with the command and its stdin. The ctx carries
// the command's Timeout.
func (e *Expectation) Do(fn func(ctx context.Context, cmd transport.Cmd, stdin []byte) (transport.Result, error)) *Expectation {
	e.fn = fn
	return e
}

// Times requires exactly n matching calls by the end of the test (checked in
// t.Cleanup); without it any number, including none, is fine.
func (e *Expectation) Times(n int) *Expectation {
	e.times = n
	return e
}

// Fake is a scripted, recording transport.Conn for one host. Expectations
// are tried in the order they were added and the first match wins; a command
// nothing matches fails the test and returns ErrUnexpected. Uploads are
// always accepted, recorded, and visible through File. Fake is safe for
// concurrent use.
type Fake struct {
	t    testing.TB
	host string

	mu         sync.Mutex
	exps       []*Expectation
	calls      []Call
	files      map[string]Call
	handshakes int
	closed     bool
}

var _ transport.Conn = (*Fake)(nil)

// NewFake returns a Fake for host. At the end of the test it checks that
// every expectation with Times(n) was called exactly n times.
func NewFake(t testing.TB, host string) *Fake {
	f := &Fake{t: t, host: host, files: map[string]Call{}, handshakes: 1}
	t.Cleanup(f.check)
	return f
}

// Expect adds an expectation for the commands m matches; it answers exit 0
// with no output until told otherwise.
func (f *Fake) Expect(m Matcher) *Expectation {
	e := &Expectation{match: m}
	f.mu.Lock()
	f.exps = append(f.exps, e)
	f.mu.Unlock()
	return e
}

// Host returns the host name the Fake was made for.
func (f *Fake) Host() string { return f.host }

// Run answers cmd from the first matching expectation and records it.
func (f *Fake) Run(ctx context.Context, cmd transport.Cmd) (transport.Result, error) {
	f.t.Helper()
	if err := cmd.Validate(); err != nil {
		f.t.Errorf("%s: invalid command %q: %v", f.host, cmd.String(), err)
		return transport.Result{}, fmt.Errorf("%s: %q: %w", f.host, cmd.String(), err)
	}
	var stdin []byte
	if cmd.Stdin != nil {
		b, err := io.ReadAll(cmd.Stdin)
		if err != nil {
			return transport.Result{}, fmt.Errorf("%s: %q: read stdin: %w", f.host, cmd.String(), err)
		}
		stdin = b
	}
	line := cmd.String()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return transport.Result{}, fmt.Errorf("%s: %q: connection closed: %w", f.host, line, transport.ErrDisconnected)
	}
	f.calls = append(f.calls, Call{Cmd: cmd, Stdin: stdin})
	var exp *Expectation
	for _, e := range f.exps {
		if e.match.match(line, cmd) {
			exp = e
			e.used++
			break
		}
	}
	f.mu.Unlock()

	if exp == nil {
		f.t.Errorf("%s: unexpected command %s", f.host, Call{Cmd: cmd}.Line())
		return transport.Result{}, fmt.Errorf("%s: %q: %w", f.host, line, ErrUnexpected)
	}
	if err := ctx.Err(); err != nil {
		return transport.Result{}, fmt.Errorf("%s: %q: %w", f.host, line, err)
	}
	if exp.err != nil {
		return transport.Result{}, exp.err
	}
	res := exp.result
	if exp.fn != nil {
		if cmd.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
			defer cancel()
		}
		start := time.Now()
		var err error
		res, err = exp.fn(ctx, cmd, stdin)
		if res.Duration == 0 {
			res.Duration = time.Since(start)
		}
		if err != nil {
			return res, err
		}
	}
	res.Stdout = bytes.Clone(res.Stdout)
	res.Stderr = bytes.Clone(res.Stderr)
	if cmd.Stdout != nil {
		_, _ = cmd.Stdout.Write(res.Stdout)
	}
	if cmd.Stderr != nil {
		_, _ = cmd.Stderr.Write(res.Stderr)
	}
	if res.ExitCode != 0 {
		return res, &transport.ExitError{Host: f.host, Cmd: line, Result: res}
	}
	return res, nil
}

// Upload records the file; File returns it afterwards.
func (f *Fake) Upload(ctx context.Context, path string, data []byte, mode uint32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: upload %s: %w", f.host, path, err)
	}
	c := Call{Upload: true, Path: path, Mode: mode, Data: bytes.Clone(data)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("%s: upload %s: connection closed: %w", f.host, path, transport.ErrDisconnected)
	}
	f.calls = append(f.calls, c)
	f.files[path] = c
	return nil
}

// File returns the last upload to path and whether there was one.
func (f *Fake) File(path string) (data []byte, mode uint32, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.files[path]
	return c.Data, c.Mode, ok
}

// Calls returns every command and upload received so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Mutations returns the calls that change the host: uploads and commands
// marked Mutating. A plan must produce none.
func (f *Fake) Mutations() []Call {
	var out []Call
	for _, c := range f.Calls() {
		if c.Upload || c.Cmd.Mutating {
			out = append(out, c)
		}
	}
	return out
}

// Transcript renders every call with Call.Line, one per line, for golden
// files.
func (f *Fake) Transcript() string {
	var b strings.Builder
	for _, c := range f.Calls() {
		b.WriteString(c.Line())
		b.WriteByte('\n')
	}
	return b.String()
}

// Stats reports one handshake and one round trip per call.
func (f *Fake) Stats() transport.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return transport.Stats{Handshakes: f.handshakes, RoundTrips: len(f.calls)}
}

// Close marks the Fake closed; later calls fail with ErrDisconnected.
func (f *Fake) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}

func (f *Fake) check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.exps {
		if e.times > 0 && e.used != e.times {
			f.t.Errorf("%s: expectation %q called %d times, want %d", f.host, e.match, e.used, e.times)
		}
	}
}

// FakeDialer hands out one Fake per host. Dialing a host that was not
// registered with Host fails the test and returns an error wrapping
// transport.ErrUnreachable.
type FakeDialer struct {
	t     testing.TB
	mu    sync.Mutex
	hosts map[string]*Fake
	errs  map[string]error
	dials map[string]int
}

var _ transport.Dialer = (*FakeDialer)(nil)

// NewFakeDialer returns an empty FakeDialer.
func NewFakeDialer(t testing.TB) *FakeDialer {
	return &FakeDialer{t: t, hosts: map[string]*Fake{}, errs: map[string]error{}, dials: map[string]int{}}
}

// Host returns the Fake for host, creating it on first use.
func (d *FakeDialer) Host(host string) *Fake {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.hosts[host]
	if !ok {
		f = NewFake(d.t, host)
		d.hosts[host] = f
	}
	return f
}

// FailDial makes Dial(host) return err (for example one wrapping
// transport.ErrAuthFailed).
func (d *FakeDialer) FailDial(host string, err error) {
	d.mu.Lock()
	d.errs[host] = err
	d.mu.Unlock()
}

// Dial returns the host's Fake (the same one every time, as the real dialer
// reuses one connection per host).
func (d *FakeDialer) Dial(ctx context.Context, host string) (transport.Conn, error) {
	d.t.Helper()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: dial: %w", host, err)
	}
	d.mu.Lock()
	d.dials[host]++
	err := d.errs[host]
	f, ok := d.hosts[host]
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !ok {
		d.t.Errorf("unexpected dial of host %q", host)
		return nil, fmt.Errorf("%s: %w: %w", host, transport.ErrUnreachable, ErrUnexpected)
	}
	return f, nil
}

// Dials reports how many times Dial was called for host.
func (d *FakeDialer) Dials(host string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials[host]
}
