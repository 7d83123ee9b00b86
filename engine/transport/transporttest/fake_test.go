package transporttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/transport"
)

// recordingTB captures test failures instead of failing the real test, so
// the Fake's own failure reporting can be asserted.
type recordingTB struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestFakeAnswers(t *testing.T) {
	ctx := context.Background()
	f := NewFake(t, "gpu-1")
	f.Expect(Argv("nvidia-smi", "-L")).Return("GPU 0: GB10\n")
	f.Expect(HasPrefix("docker inspect")).Fail(1, "Error: No such object: ray-head")
	f.Expect(Contains("ray status")).Err(fmt.Errorf("gpu-1: %w", transport.ErrDisconnected))
	f.Expect(Regexp(`^cat\b`)).Do(func(ctx context.Context, cmd transport.Cmd, stdin []byte) (transport.Result, error) {
		return transport.Result{Stdout: stdin}, nil
	})
	f.Expect(Equal("hostname")).Return("spark-1\n").Times(2)

	tests := []struct {
		cmd        transport.Cmd
		wantOut    string
		wantCode   int
		wantErrIs  error
		wantExitEr bool
	}{
		{cmd: transport.Cmd{Argv: []string{"nvidia-smi", "-L"}}, wantOut: "GPU 0: GB10\n"},
		{cmd: transport.Cmd{Argv: []string{"docker", "inspect", "ray-head"}}, wantCode: 1, wantExitEr: true},
		{cmd: transport.Cmd{Script: "ray status --address x"}, wantErrIs: transport.ErrDisconnected},
		{cmd: transport.Cmd{Argv: []string{"cat"}, Stdin: strings.NewReader("echo")}, wantOut: "echo"},
		{cmd: transport.Cmd{Argv: []string{"hostname"}}, wantOut: "spark-1\n"},
		{cmd: transport.Cmd{Script: "hostname", Mutating: true, Env: map[string]string{"TOKEN": "s3cret"}}, wantOut: "spark-1\n"},
	}
	for _, tt := range tests {
		res, err := f.Run(ctx, tt.cmd)
		if string(res.Stdout) != tt.wantOut || res.ExitCode != tt.wantCode {
			t.Errorf("%s: got %q exit %d, want %q exit %d", tt.cmd, res.Stdout, res.ExitCode, tt.wantOut, tt.wantCode)
		}
		var ee *transport.ExitError
		if got := errors.As(err, &ee); got != tt.wantExitEr {
			t.Errorf("%s: ExitError %v, want %v (err %v)", tt.cmd, got, tt.wantExitEr, err)
		}
		if tt.wantErrIs != nil && !errors.Is(err, tt.wantErrIs) {
			t.Errorf("%s: err %v, want %v", tt.cmd, err, tt.wantErrIs)
		}
	}
	if err := f.Upload(ctx, "/etc/rayform/env", []byte("A=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, mode, ok := f.File("/etc/rayform/env")
	if !ok || string(data) != "A=1\n" || mode != 0o600 {
		t.Errorf("File = %q %o %v", data, mode, ok)
	}
	want := `$ nvidia-smi -L
$ docker inspect ray-head
$ ray status --address x
$ cat
$ hostname
! [env TOKEN] hostname
upload /etc/rayform/env 0600 (4 bytes)
`
	if got := f.Transcript(); got != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(f.Transcript(), "s3cret") {
		t.Errorf("transcript shows an env value")
	}
	if got := len(f.Mutations()); got != 2 {
		t.Errorf("Mutations() = %d, want 2 (mutating command and upload)", got)
	}
	if s := f.Stats(); s.RoundTrips != 7 || s.Handshakes != 1 {
		t.Errorf("Stats = %+v, want 7 round trips, 1 handshake", s)
	}
}

func TestFakeFailsTestOnUnexpectedCommand(t *testing.T) {
	rec := &recordingTB{}
	f := NewFake(rec, "gpu-1")
	f.Expect(Equal("true"))
	_, err := f.Run(context.Background(), transport.Cmd{Argv: []string{"rm", "-rf", "/"}})
	if !errors.Is(err, ErrUnexpected) {
		t.Errorf("err = %v, want ErrUnexpected", err)
	}
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "unexpected command $ rm -rf /") {
		t.Errorf("test failures = %q, want one naming the command", rec.errors)
	}
}

func TestFakeChecksTimes(t *testing.T) {
	rec := &recordingTB{}
	f := NewFake(rec, "gpu-1")
	f.Expect(Equal("true")).Times(2)
	if _, err := f.Run(context.Background(), transport.Cmd{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	rec.runCleanups()
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "called 1 times, want 2") {
		t.Errorf("test failures = %q, want a Times violation", rec.errors)
	}
}

func TestFakeDialer(t *testing.T) {
	rec := &recordingTB{}
	d := NewFakeDialer(rec)
	d.Host("a")
	d.FailDial("b", fmt.Errorf("b: %w", transport.ErrAuthFailed))
	ctx := context.Background()
	c1, err := d.Dial(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := d.Dial(ctx, "a")
	if c1 != c2 || d.Dials("a") != 2 {
		t.Errorf("Dial should hand out the same Fake per host; dials = %d", d.Dials("a"))
	}
	if _, err := d.Dial(ctx, "b"); !errors.Is(err, transport.ErrAuthFailed) {
		t.Errorf("Dial(b) = %v, want ErrAuthFailed", err)
	}
	if _, err := d.Dial(ctx, "c"); !errors.Is(err, transport.ErrUnreachable) || len(rec.errors) != 1 {
		t.Errorf("Dial(c) = %v, failures %q; want ErrUnreachable and a test failure", err, rec.errors)
	}
}

func TestFakeConformance(t *testing.T) {
	// The Fake is not a real host: only check it honours the basic contract
	// the engine relies on (ExitError, Stdout/Stderr writers, closed conn).
	f := NewFake(t, "h")
	f.Expect(Any()).ReturnResult(transport.Result{Stdout: []byte("o"), Stderr: []byte("e"), ExitCode: 3})
	var out, errb strings.Builder
	_, err := f.Run(context.Background(), transport.Cmd{Argv: []string{"x"}, Stdout: &out, Stderr: &errb})
	var ee *transport.ExitError
	if !errors.As(err, &ee) || ee.Result.ExitCode != 3 || out.String() != "o" || errb.String() != "e" {
		t.Errorf("err %v, out %q, err %q", err, out.String(), errb.String())
	}
	_ = f.Close()
	if _, err := f.Run(context.Background(), transport.Cmd{Argv: []string{"x"}}); !errors.Is(err, transport.ErrDisconnected) {
		t.Errorf("Run after Close: %v, want ErrDisconnected", err)
	}
}
