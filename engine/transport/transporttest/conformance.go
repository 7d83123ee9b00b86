package transporttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// HostSide reaches the host behind a Conn by another way than the Conn under
// test, so the conformance suite can check what really happened there
// (processes gone, files and modes, process command lines).
type HostSide interface {
	// Shell runs a POSIX sh script on the host and returns its stdout.
	Shell(ctx context.Context, script string) ([]byte, error)
	// TempDir returns a fresh, empty directory on the host that is removed
	// when the test ends.
	TempDir(t *testing.T) string
}

// LocalHost is the HostSide of a host that is this machine (the local
// transport, an in-process SSH server, an sshd on loopback).
type LocalHost struct{}

// Shell runs script with /bin/sh on this machine.
func (LocalHost) Shell(ctx context.Context, script string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("host side: sh -c %q: %w: %s", script, err, stderr.Bytes())
	}
	return out, nil
}

// TempDir returns t.TempDir().
func (LocalHost) TempDir(t *testing.T) string { return t.TempDir() }

// RunConformance runs the behaviour every transport.Conn must have against
// connections made by newConn (called once per subtest; the suite closes
// them). host must reach the same host as the connections.
func RunConformance(t *testing.T, newConn func(t *testing.T) transport.Conn, host HostSide) {
	s := suite{newConn: newConn, host: host}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"StdoutStderr", s.testStdoutStderr},
		{"ExitCodes", s.testExitCodes},
		{"ArgvRoundTrip", s.testArgvRoundTrip},
		{"Stdin", s.testStdin},
		{"NoStdinIsEOF", s.testNoStdin},
		{"UnreadStdinDoesNotBlock", s.testUnreadStdin},
		{"LargeOutput", s.testLargeOutput},
		{"Streaming", s.testStreaming},
		{"Env", s.testEnv},
		{"SecretNotInArgv", s.testSecretNotInArgv},
		{"CancelKillsRemoteProcess", s.testCancel},
		{"TimeoutKillsRemoteProcess", s.testTimeout},
		{"Upload", s.testUpload},
		{"UploadFailureLeavesNoTemp", s.testUploadFailure},
		{"Concurrent", s.testConcurrent},
		{"Stats", s.testStats},
		{"InvalidCmd", s.testInvalidCmd},
		{"Closed", s.testClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.fn)
	}
}

type suite struct {
	newConn func(t *testing.T) transport.Conn
	host    HostSide
}

// conn opens a connection for one subtest and closes it at its end.
func (s suite) conn(t *testing.T) transport.Conn {
	t.Helper()
	c := s.newConn(t)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (s suite) testStdoutStderr(t *testing.T) {
	c := s.conn(t)
	res, err := c.Run(ctxFor(t), transport.Cmd{Script: "printf 'to out'; printf 'to err' >&2; printf ' again'"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if string(res.Stdout) != "to out again" || string(res.Stderr) != "to err" || res.ExitCode != 0 {
		t.Errorf("got stdout %q stderr %q exit %d, want %q %q 0", res.Stdout, res.Stderr, res.ExitCode, "to out again", "to err")
	}
}

func (s suite) testExitCodes(t *testing.T) {
	c := s.conn(t)
	for _, code := range []int{0, 1, 2, 42, 127, 255} {
		res, err := c.Run(ctxFor(t), transport.Cmd{Script: fmt.Sprintf("echo failing >&2; exit %d", code)})
		if res.ExitCode != code {
			t.Errorf("exit %d: Result.ExitCode = %d", code, res.ExitCode)
		}
		if code == 0 {
			if err != nil {
				t.Errorf("exit 0: err = %v", err)
			}
			continue
		}
		var ee *transport.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("exit %d: err = %v (%T), want *transport.ExitError", code, err, err)
			continue
		}
		if ee.Result.ExitCode != code || ee.Host != c.Host() || !strings.Contains(ee.Error(), "failing") {
			t.Errorf("exit %d: ExitError = %+v (%q)", code, ee, ee.Error())
		}
	}
	// A command that does not exist is an exit status too (127), not a
	// transport error.
	_, err := c.Run(ctxFor(t), transport.Cmd{Argv: []string{"rayform-no-such-command"}})
	var ee *transport.ExitError
	if !errors.As(err, &ee) || ee.Result.ExitCode != 127 {
		t.Errorf("missing command: err = %v, want ExitError with code 127", err)
	}
}

func (s suite) testArgvRoundTrip(t *testing.T) {
	c := s.conn(t)
	args := []string{"", "two words", "it's", `"q"`, `\`, "$HOME", "`id`", "*", "~", "a=b", "line1\nline2", "\xff", "-n"}
	res, err := c.Run(ctxFor(t), transport.Cmd{Argv: append([]string{"printf", `%s\0`}, args...)})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := strings.Join(args, "\x00") + "\x00"
	if string(res.Stdout) != want {
		t.Errorf("argv came back as %q, want %q", res.Stdout, want)
	}
}

func (s suite) testStdin(t *testing.T) {
	c := s.conn(t)
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	res, err := c.Run(ctxFor(t), transport.Cmd{Argv: []string{"cat"}, Stdin: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !bytes.Equal(res.Stdout, data) {
		t.Errorf("cat returned %d bytes, want the %d bytes sent (equal: false)", len(res.Stdout), len(data))
	}
	res, err = c.Run(ctxFor(t), transport.Cmd{Script: "read a; read b; echo \"$b $a\"", Stdin: strings.NewReader("one\ntwo\n")})
	if err != nil || string(res.Stdout) != "two one\n" {
		t.Errorf("script with stdin: %q, %v", res.Stdout, err)
	}
}

func (s suite) testNoStdin(t *testing.T) {
	c := s.conn(t)
	res, err := c.Run(ctxFor(t), transport.Cmd{Script: "wc -c | tr -d ' '"})
	if err != nil || string(res.Stdout) != "0\n" {
		t.Errorf("without Stdin, wc -c read %q (err %v), want an immediate EOF", res.Stdout, err)
	}
}

// neverEnding is a Stdin that never returns (a pipe nobody closes).
type neverEnding struct{ done <-chan struct{} }

func (n neverEnding) Read([]byte) (int, error) {
	<-n.done
	return 0, io.EOF
}

func (s suite) testUnreadStdin(t *testing.T) {
	c := s.conn(t)
	done := make(chan struct{})
	defer close(done)
	res, err := c.Run(ctxFor(t), transport.Cmd{Argv: []string{"echo", "finished"}, Stdin: neverEnding{done}})
	if err != nil || string(res.Stdout) != "finished\n" {
		t.Errorf("a command that ignores its open stdin: %q, %v; want it finished without error", res.Stdout, err)
	}
}

func (s suite) testLargeOutput(t *testing.T) {
	c := s.conn(t)
	const outN, errN = 10 << 20, 2 << 20
	script := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' o & head -c %d /dev/zero | tr '\\0' e >&2; wait", outN, errN)
	res, err := c.Run(ctxFor(t), transport.Cmd{Script: script})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(res.Stdout) != outN || bytes.Count(res.Stdout, []byte("o")) != outN {
		t.Errorf("stdout: %d bytes, want %d 'o'", len(res.Stdout), outN)
	}
	if len(res.Stderr) != errN || bytes.Count(res.Stderr, []byte("e")) != errN {
		t.Errorf("stderr: %d bytes, want %d 'e'", len(res.Stderr), errN)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (s suite) testStreaming(t *testing.T) {
	c := s.conn(t)
	var out, errb syncBuffer
	res, err := c.Run(ctxFor(t), transport.Cmd{Script: "echo a; echo b >&2; echo c", Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.String() != "a\nc\n" || string(res.Stdout) != "a\nc\n" {
		t.Errorf("Stdout writer got %q, Result %q; want both %q", out.String(), res.Stdout, "a\nc\n")
	}
	if errb.String() != "b\n" || string(res.Stderr) != "b\n" {
		t.Errorf("Stderr writer got %q, Result %q; want both %q", errb.String(), res.Stderr, "b\n")
	}
}

func (s suite) testEnv(t *testing.T) {
	c := s.conn(t)
	env := map[string]string{
		"RF_PLAIN":   "value",
		"RF_EMPTY":   "",
		"RF_SPACES":  "  two  words  ",
		"RF_QUOTES":  `it's "quoted" \ back`,
		"RF_NEWLINE": "line1\nline2\n",
		"RF_DOLLAR":  "$HOME $(id) `id`",
		"RF_UNICODE": "日本語 é",
		"RF_EQUALS":  "a=b=c",
	}
	keys := []string{"RF_PLAIN", "RF_EMPTY", "RF_SPACES", "RF_QUOTES", "RF_NEWLINE", "RF_DOLLAR", "RF_UNICODE", "RF_EQUALS"}
	var script strings.Builder
	script.WriteString(`printf '%s\0'`)
	var want strings.Builder
	for _, k := range keys {
		script.WriteString(` "$` + k + `"`)
		want.WriteString(env[k] + "\x00")
	}
	for _, cmd := range []transport.Cmd{
		{Script: script.String(), Env: env},
		{Argv: []string{"sh", "-c", script.String()}, Env: env},
	} {
		res, err := c.Run(ctxFor(t), cmd)
		if err != nil {
			t.Fatalf("Run(%q): %v", cmd.String(), err)
		}
		if string(res.Stdout) != want.String() {
			t.Errorf("Run(%q): env came back as %q, want %q", cmd.String(), res.Stdout, want.String())
		}
	}
	// Env and Stdin together: the env must not eat the command's stdin.
	res, err := c.Run(ctxFor(t), transport.Cmd{Script: `printf '%s:' "$RF_PLAIN"; cat`, Env: map[string]string{"RF_PLAIN": "x"}, Stdin: strings.NewReader("stdin\n")})
	if err != nil || string(res.Stdout) != "x:stdin\n" {
		t.Errorf("env with stdin: %q, %v", res.Stdout, err)
	}
}

func randomToken(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// pollTimeout bounds every wait on the host's state: long enough for a loaded
// machine, short enough that a broken transport fails the test.
const pollTimeout = 30 * time.Second

// pollEvery is the interval between two looks at the host's state.
const pollEvery = 20 * time.Millisecond

// waitUntil looks at the host with ready until it reports true, failing the
// test with what once pollTimeout has passed; the last look's detail is
// quoted in the failure.
func waitUntil(t *testing.T, what string, ready func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxFor(t), pollTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, detail := ready(ctx)
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not so after %v (last seen: %s)", what, pollTimeout, detail)
		case <-tick.C:
		}
	}
}

// waitForFile waits until path exists on the host and holds a complete line,
// and returns its content.
func (s suite) waitForFile(t *testing.T, path string) string {
	t.Helper()
	var v string
	waitUntil(t, path+" appears on the host", func(ctx context.Context) (bool, string) {
		out, _ := s.host.Shell(ctx, "cat "+shell.Quote(path)+" 2>/dev/null")
		v = strings.TrimSpace(string(out))
		return v != "" && strings.HasSuffix(string(out), "\n"), fmt.Sprintf("%q", out)
	})
	return v
}

// waitForCmdline waits until process pid on the host runs argv (its exec is
// done: before it, /proc/PID still shows the shell that will exec it, and
// during it /proc/PID/environ may read empty).
func (s suite) waitForCmdline(t *testing.T, pid string, argv ...string) {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	waitUntil(t, "process "+pid+" runs "+strings.Join(argv, " "), func(ctx context.Context) (bool, string) {
		out, _ := s.host.Shell(ctx, "cat /proc/"+pid+"/cmdline 2>/dev/null")
		return string(out) == want, fmt.Sprintf("%q", out)
	})
}

// alive returns the pids among pids that are still running on the host
// (zombies count as gone: they are dead, only not yet reaped).
func (s suite) alive(t *testing.T, pids []string) []string {
	t.Helper()
	script := `for p in ` + strings.Join(pids, " ") + `; do
	if [ -r /proc/$p/stat ]; then
		st=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f1)
		[ "$st" = Z ] || echo $p
	elif kill -0 $p 2>/dev/null; then echo $p; fi
done`
	out, err := s.host.Shell(ctxFor(t), script)
	if err != nil {
		t.Fatalf("checking processes on the host: %v", err)
	}
	return strings.Fields(string(out))
}

// waitGone waits until none of pids runs on the host.
func (s suite) waitGone(t *testing.T, pids []string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("processes %v end once the command was ended", pids), func(context.Context) (bool, string) {
		left := s.alive(t, pids)
		return len(left) == 0, fmt.Sprintf("still running: %v", left)
	})
}

// longRunning returns a script that records its own pid and its child's in
// dir, then waits forever on the child: killing only the shell would leave
// the sleep behind, so the check proves the whole tree was ended.
func longRunning(dir string) string {
	d := shell.Quote(dir)
	return `sleep 3600 & echo $! > ` + d + `/child.tmp && mv ` + d + `/child.tmp ` + d + `/child
echo $$ > ` + d + `/pid.tmp && mv ` + d + `/pid.tmp ` + d + `/pid
wait`
}

// start runs cmd in the background and returns a channel with Run's error.
func start(ctx context.Context, c transport.Conn, cmd transport.Cmd) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, cmd)
		done <- err
	}()
	return done
}

func (s suite) testSecretNotInArgv(t *testing.T) {
	c := s.conn(t)
	dir := s.host.TempDir(t)
	secret := "rf-secret-" + randomToken(t)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	d := shell.Quote(dir)
	done := start(ctx, c, transport.Cmd{
		Script: `echo $$ > ` + d + `/pid.tmp && mv ` + d + `/pid.tmp ` + d + `/pid; exec sleep 3600`,
		Env:    map[string]string{"RF_SECRET": secret},
	})
	pid := s.waitForFile(t, dir+"/pid")
	// The pid file is written before the shell execs the command: look once
	// the process is the command itself.
	s.waitForCmdline(t, pid, "sleep", "3600")
	// Positive control: the secret did reach the process, in its environment.
	environ, err := s.host.Shell(ctxFor(t), "tr '\\0' '\\n' < /proc/"+pid+"/environ")
	if err != nil || !strings.Contains(string(environ), "RF_SECRET="+secret+"\n") {
		t.Errorf("RF_SECRET not in the environment of the running command (err %v)", err)
	}
	// The secret must be in no process's command line on the host, while the
	// command runs. (This scan's own argv does not contain it.)
	cmdlines, err := s.host.Shell(ctxFor(t), `for f in /proc/[0-9]*/cmdline; do printf '%s: ' "$f"; tr '\0' ' ' < "$f" 2>/dev/null; echo; done`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cmdlines), "/proc/"+pid+"/cmdline: sleep 3600") {
		t.Errorf("the process scan did not see the running command (sleep 3600): the check below proves nothing")
	}
	if strings.Contains(string(cmdlines), secret) {
		for _, l := range strings.Split(string(cmdlines), "\n") {
			if strings.Contains(l, secret) {
				t.Errorf("secret visible in a process command line on the host: %q", l)
			}
		}
	}
	cancel()
	<-done
	s.waitGone(t, []string{pid})
}

func (s suite) testCancel(t *testing.T) {
	c := s.conn(t)
	dir := s.host.TempDir(t)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	done := start(ctx, c, transport.Cmd{Script: longRunning(dir)})
	pids := []string{s.waitForFile(t, dir+"/pid"), s.waitForFile(t, dir+"/child")}
	if left := s.alive(t, pids); len(left) != 2 {
		t.Fatalf("processes %v should be running before cancel, alive: %v", pids, left)
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel: err = %v, want context.Canceled", err)
	}
	if err != nil && !strings.Contains(err.Error(), c.Host()) {
		t.Errorf("error %q does not name the host %q", err, c.Host())
	}
	s.waitGone(t, pids)
	// The connection is still usable afterwards.
	if res, err := c.Run(ctxFor(t), transport.Cmd{Argv: []string{"echo", "ok"}}); err != nil || string(res.Stdout) != "ok\n" {
		t.Errorf("Run after a cancelled command: %q, %v", res.Stdout, err)
	}
}

func (s suite) testTimeout(t *testing.T) {
	c := s.conn(t)
	// The timeout must outlast the process start, or the command ends
	// before it recorded the pids whose end the test checks. On a loaded
	// machine the start can take longer than the first timeout tried: then
	// the command runs again with twice the timeout.
	for timeout := 2 * time.Second; ; timeout *= 2 {
		dir := s.host.TempDir(t)
		done := start(ctxFor(t), c, transport.Cmd{Script: longRunning(dir), Timeout: timeout})
		r := s.pidsOrEnd(t, dir, done)
		if !r.started() && timeout < 30*time.Second {
			continue
		}
		err := r.err
		if !r.ended {
			err = <-done
		}
		if !errors.Is(err, transport.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run past its Timeout: err = %v, want ErrTimeout and DeadlineExceeded", err)
		}
		if !r.started() {
			t.Fatalf("the command never recorded its pids within a Timeout of %v", timeout)
		}
		s.waitGone(t, r.pids)
		return
	}
}

// background is what is known of a longRunning command started in the
// background: the pids it recorded, and whether it ended (with Run's
// error).
type background struct {
	pids  []string
	ended bool
	err   error
}

// started reports whether the command recorded its pid and its child's.
func (b background) started() bool { return len(b.pids) == 2 }

// pidsOrEnd waits until the longRunning command in dir recorded its pid
// and its child's, or until it ended (done).
func (s suite) pidsOrEnd(t *testing.T, dir string, done <-chan error) background {
	t.Helper()
	var b background
	read := func(ctx context.Context) {
		out, _ := s.host.Shell(ctx, "cat "+shell.Quote(dir+"/pid")+" "+shell.Quote(dir+"/child")+" 2>/dev/null")
		b.pids = strings.Fields(string(out))
	}
	waitUntil(t, "the command in "+dir+" records its pids or ends", func(ctx context.Context) (bool, string) {
		if read(ctx); b.started() {
			return true, ""
		}
		select {
		case b.err = <-done:
			b.ended = true
			return true, ""
		default:
			return false, fmt.Sprintf("pids %v", b.pids)
		}
	})
	if b.ended {
		read(ctxFor(t)) // both files may have been written just before the end
	}
	return b
}

func (s suite) testUpload(t *testing.T) {
	c := s.conn(t)
	dir := s.host.TempDir(t)
	data := make([]byte, 256*3)
	for i := range data {
		data[i] = byte(i)
	}
	tests := []struct {
		name string
		data []byte
		mode uint32
	}{
		{"binary file", data, 0o640},
		{"it's a file", []byte("text\n"), 0o600},
		{"it's a file", []byte("replaced\n"), 0o755}, // overwrite, mode changes
		{"empty", nil, 0o644},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, tt.name)
		if err := c.Upload(ctxFor(t), path, tt.data, tt.mode); err != nil {
			t.Fatalf("Upload(%q): %v", path, err)
		}
		got, err := s.host.Shell(ctxFor(t), "cat "+shell.Quote(path))
		if err != nil || !bytes.Equal(got, tt.data) {
			t.Errorf("%q holds %q (err %v), want %q", path, got, err, tt.data)
		}
		mode, err := s.host.Shell(ctxFor(t), "stat -c %a "+shell.Quote(path))
		if want := strconv.FormatUint(uint64(tt.mode), 8) + "\n"; err != nil || string(mode) != want {
			t.Errorf("%q has mode %q (err %v), want %q", path, mode, err, want)
		}
	}
	ls, err := s.host.Shell(ctxFor(t), "ls -A "+shell.Quote(dir))
	if want := "binary file\nempty\nit's a file\n"; err != nil || string(ls) != want {
		t.Errorf("directory holds %q (err %v), want only %q: a temp file was left behind", ls, err, want)
	}
}

func (s suite) testUploadFailure(t *testing.T) {
	c := s.conn(t)
	dir := s.host.TempDir(t)
	// The target is a directory: the rename fails, and the temp file must go.
	target := filepath.Join(dir, "target")
	if _, err := s.host.Shell(ctxFor(t), "mkdir "+shell.Quote(target)+" && touch "+shell.Quote(target+"/keep")); err != nil {
		t.Fatal(err)
	}
	err := c.Upload(ctxFor(t), target, []byte("x"), 0o644)
	if err == nil {
		t.Fatalf("Upload onto a non-empty directory succeeded")
	}
	if !strings.Contains(err.Error(), c.Host()) {
		t.Errorf("error %q does not name the host", err)
	}
	ls, _ := s.host.Shell(ctxFor(t), "ls -A "+shell.Quote(dir))
	if string(ls) != "target\n" {
		t.Errorf("after a failed upload the directory holds %q, want only %q", ls, "target\n")
	}
	if err := c.Upload(ctxFor(t), filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Errorf("Upload into a missing directory succeeded")
	}
}

func (s suite) testConcurrent(t *testing.T) {
	c := s.conn(t)
	const n = 20 // more than any per-connection session cap
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("cmd %d", i)
			res, err := c.Run(ctxFor(t), transport.Cmd{Argv: []string{"echo", want}})
			if err == nil && string(res.Stdout) != want+"\n" {
				err = fmt.Errorf("got %q, want %q", res.Stdout, want+"\n")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Errorf("concurrent commands: %v", err)
	}
}

func (s suite) testStats(t *testing.T) {
	c := s.conn(t)
	before := c.Stats()
	for range 3 {
		if _, err := c.Run(ctxFor(t), transport.Cmd{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = c.Run(ctxFor(t), transport.Cmd{Argv: []string{"false"}})
	if err := c.Upload(ctxFor(t), filepath.Join(s.host.TempDir(t), "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	if got := after.RoundTrips - before.RoundTrips; got != 5 {
		t.Errorf("4 commands and 1 upload counted %d round trips, want 5", got)
	}
	if after.Handshakes != before.Handshakes {
		t.Errorf("handshakes went from %d to %d while reusing the connection", before.Handshakes, after.Handshakes)
	}
}

func (s suite) testInvalidCmd(t *testing.T) {
	c := s.conn(t)
	for _, cmd := range []transport.Cmd{
		{},
		{Argv: []string{"echo"}, Script: "echo"},
		{Argv: []string{"echo", "a\x00b"}},
		{Script: "true", Env: map[string]string{"BAD-NAME": "x"}},
	} {
		if _, err := c.Run(ctxFor(t), cmd); err == nil {
			t.Errorf("Run(%#v) succeeded, want a validation error", cmd)
		}
	}
}

func (s suite) testClosed(t *testing.T) {
	c := s.newConn(t)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := c.Run(ctxFor(t), transport.Cmd{Argv: []string{"true"}}); err == nil {
		t.Errorf("Run after Close succeeded")
	}
}
