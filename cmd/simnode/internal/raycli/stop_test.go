package raycli

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// holderScript plays a Ray daemon caught mid-exit: it listens on a port
// from a second thread's lifetime, and on SIGTERM ends only its main thread
// (pthread_exit), so that /proc shows the process as a zombie ("Z") while
// the other thread still holds the listening socket — what a multi-threaded
// GCS looks like between its main thread's exit and its last thread's.
const holderScript = `import ctypes, signal, socket, threading, time
def term(signum, frame):
    ctypes.CDLL(None).pthread_exit(None)
signal.signal(signal.SIGTERM, term)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
threading.Thread(target=lambda: time.sleep(3600)).start()
print(s.getsockname()[1], flush=True)
while True:
    time.sleep(1)
`

// `ray stop` returns only once every process it found has ended, all its
// threads included: the port the "daemon" listened on is free when stop
// returns. (Failed before: stop took the zombie main thread for an ended
// process, printed "Stopped all 1 Ray processes." and returned with the
// port still bound — TestLab's `ray start --head` right after `ray stop
// --force` then failed with "Failed to bind to address 0.0.0.0:6379:
// address already in use".)
func TestStopWaitsForEveryThread(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3 to hold a socket from a thread after the main thread exits")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DaemonCommand), []byte(holderScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// argv[1] is the daemon command and argv[2] a path under the node's
	// Ray root, as for simnode's own daemon: `ray stop` finds it.
	holder := exec.Command("python3", DaemonCommand, filepath.Join(dir, "ray", "session_x", "daemon.json"))
	holder.Dir = dir
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("holder's port: %v", err)
	}
	addr := "127.0.0.1:" + strings.TrimSpace(port)
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("%s is free before ray stop; the holder does not hold it", addr)
	}

	p, out, errb := proc(t, "stop", "--grace-period", "1")
	p.Env["RAY_TMPDIR"] = dir
	if code := Main(context.Background(), p); code != 0 {
		t.Fatalf("ray stop exited %d: %s", code, errb)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("after ray stop returned: %v\nstdout:\n%s", err, out)
	}
	ln.Close()
	// SIGTERM left it half-ended: stopped by the SIGKILL after the grace
	// period, as the real `ray stop` reports it.
	if want := "Stopped only 0 out of 1 Ray processes within the grace period 1 seconds."; !strings.Contains(out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
}
