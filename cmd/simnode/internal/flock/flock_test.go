package flock

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// flock runs Main in-process with args and returns its exit code, stdout
// and stderr.
func flock(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	p := &sim.Proc{Args: args, Env: sim.Env{"PATH": os.Getenv("PATH")}, Stdout: &out, Stderr: &errb}
	code := Main(context.Background(), p)
	return code, out.String(), errb.String()
}

// open returns a new open file description of path (flock(2) locks belong
// to one; two opens of a file conflict even in one process).
func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func fdArg(f *os.File) string { return strconv.Itoa(int(f.Fd())) }

// locked reports whether another open file description holds a lock on
// path that conflicts with a shared one.
func locked(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		return false
	}
	if err != syscall.EWOULDBLOCK {
		t.Fatal(err)
	}
	return true
}

func TestFDForm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve-qwen.lock")
	holder, other := open(t, path), open(t, path)

	if code, _, stderr := flock(t, "-n", fdArg(holder)); code != 0 {
		t.Fatalf("flock -n FD on a free file: exit %d (%s)", code, stderr)
	}
	if !locked(t, path) {
		t.Fatal("flock FD returned but holds no lock")
	}
	// The probe's test: shared, non-blocking, 75 on conflict.
	if code, _, _ := flock(t, "-n", "-s", "-E", "75", fdArg(other)); code != 75 {
		t.Fatalf("flock -n -s -E 75 against an exclusive lock: exit %d, want 75", code)
	}
	if code, _, _ := flock(t, "-n", "-s", fdArg(other)); code != 1 {
		t.Fatalf("flock -n -s against an exclusive lock: exit %d, want 1", code)
	}
	if code, _, _ := flock(t, "-ns", "-E75", fdArg(other)); code != 75 {
		t.Fatalf("grouped short options: exit %d, want 75", code)
	}
	if code, _, _ := flock(t, "--nonblock", "--shared", "--conflict-exit-code=75", fdArg(other)); code != 75 {
		t.Fatalf("long options: exit %d, want 75", code)
	}
	if code, _, _ := flock(t, "-w", "0.02", fdArg(other)); code != 1 {
		t.Fatalf("flock -w 0.02 against a held lock: exit %d, want 1", code)
	}
	if code, _, _ := flock(t, "-u", fdArg(holder)); code != 0 || locked(t, path) {
		t.Fatalf("flock -u: exit %d, still locked %v", code, locked(t, path))
	}
	if code, _, _ := flock(t, "-n", "-s", "-E", "75", fdArg(other)); code != 0 {
		t.Fatalf("flock -n -s on a free file: exit %d, want 0", code)
	}
	// Shared locks coexist.
	if code, _, _ := flock(t, "-n", "-s", fdArg(holder)); code != 0 {
		t.Fatalf("a second shared lock: exit %d, want 0", code)
	}
}

func TestFileForm(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.lock")
	if code, _, stderr := flock(t, "-n", path, "true"); code != 0 {
		t.Fatalf("flock -n FILE true: exit %d (%s)", code, stderr)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("flock FILE did not create the file: %v", err)
	}
	if code, _, _ := flock(t, path, "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("the command's status: %d, want 3", code)
	}
	if code, _, _ := flock(t, path, "-c", "exit 4"); code != 4 {
		t.Fatalf("-c COMMAND: exit %d, want 4", code)
	}
	if code, _, _ := flock(t, path, "sh", "-c", "kill -TERM $$"); code != 128+15 {
		t.Fatalf("a command killed by SIGTERM: exit %d, want 143", code)
	}
	if code, _, stderr := flock(t, path, "rayform-no-such-command"); code != 69 || !strings.Contains(stderr, "flock: failed to execute rayform-no-such-command: No such file or directory") {
		t.Fatalf("a missing command: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := flock(t, dir, "true"); code != 0 {
		t.Fatalf("flock DIRECTORY true: exit %d", code)
	}

	held := open(t, path)
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := flock(t, "-n", path, "true"); code != 1 {
		t.Fatalf("flock -n FILE against a held lock: exit %d, want 1", code)
	}
	if code, _, _ := flock(t, "-n", "-s", "-E", "75", path, "true"); code != 75 {
		t.Fatalf("flock -n -s -E 75 FILE against a held lock: exit %d, want 75", code)
	}
	if code, _, _ := flock(t, "-w", "0", path, "true"); code != 1 {
		t.Fatalf("flock -w 0 (= -n): exit %d, want 1", code)
	}
}

// TestCommandInheritsTheLock: the command holds the lock as long as it
// runs, even after flock itself is gone (its descriptor is inherited).
func TestCommandInheritsTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.lock")
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		p := &sim.Proc{Args: []string{path, "sh", "-c", "echo locked; read x"}, Env: sim.Env{"PATH": os.Getenv("PATH")},
			Stdin: stdinR, Stdout: stdoutW, Stderr: io.Discard}
		done <- Main(context.Background(), p)
		stdoutW.Close()
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("command: %q, %v", line, err)
	}
	if !locked(t, path) {
		t.Fatal("the lock is not held while the command runs")
	}
	stdinW.Close() // read x returns: the command exits
	if code := <-done; code != 1 {
		t.Fatalf("exit %d, want 1 (read at EOF)", code)
	}
	if locked(t, path) {
		t.Fatal("the lock outlived the command and flock")
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 64, "flock: not enough arguments\nTry 'flock --help' for more information.\n"},
		{[]string{"-n"}, 64, "flock: requires file descriptor, file or directory\n"},
		{[]string{"-E", "300", "9"}, 64, "flock: exit code out of range (expected 0 to 255)\n"},
		{[]string{"-E", "x", "9"}, 64, "flock: invalid exit code: 'x'\n"},
		{[]string{"-w", "soon", "9"}, 64, "flock: invalid timeout value: 'soon'\n"},
		{[]string{"-z", "9"}, 64, "flock: invalid option -- 'z'\nTry 'flock --help' for more information.\n"},
		{[]string{"--bogus", "9"}, 64, "flock: unrecognized option '--bogus'\nTry 'flock --help' for more information.\n"},
		{[]string{"-E"}, 64, "flock: option requires an argument -- 'E'\nTry 'flock --help' for more information.\n"},
		{[]string{"nine"}, 64, "flock: bad file descriptor: 'nine'\n"},
		{[]string{"-F", "-o", "x", "true"}, 64, "flock: the --no-fork and --close options are incompatible\n"},
		{[]string{"x", "-c"}, 64, "flock: -c requires exactly one command argument\n"},
		{[]string{"987"}, 65, "flock: 987: Bad file descriptor\n"},
		{[]string{filepath.Join(dir, "no", "such", "dir"), "true"}, 66, "flock: cannot open lock file " + filepath.Join(dir, "no", "such", "dir") + ": No such file or directory\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := flock(t, tt.args...)
			if code != tt.code || stderr != tt.stderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr, tt.code, tt.stderr)
			}
		})
	}
	if code, stdout, _ := flock(t, "-V"); code != 0 || !strings.HasPrefix(stdout, "flock from util-linux") {
		t.Errorf("-V: exit %d, %q", code, stdout)
	}
	if code, stdout, _ := flock(t, "--help"); code != 0 || !strings.Contains(stdout, "-E, --conflict-exit-code") {
		t.Errorf("--help: exit %d, %q", code, stdout)
	}
}
