package ssh

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
)

// clientEnv carries the configuration of TestHelperClient, the test
// binary run again as a client of the real sshd.
const clientEnv = "RAYFORM_SSH_TEST_CLIENT"

type helperClient struct {
	Home, Key, Host, KnownHosts, Script string
	Port                                int
}

// TestCommandDiesWithItsClient (issue 30, item 5): a client killed with
// SIGKILL while its command runs (a command that writes nothing and reads
// nothing, as a download to a file or a wait on a lock) leaves nothing
// running on the host: the command and what it started end once the
// connection is gone, though sshd sends no SIGHUP to a session without a
// pty. Before the wrapper's watchdog, the command ran on.
func TestCommandDiesWithItsClient(t *testing.T) {
	e := newEnv(t)
	srv := startServer(t, "openssh", serverOpts{}, e.key.PublicKey())
	e.trust(t, srv.addr, srv.hostKey)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// The shell and a child, both of the command's process group; the
	// child's pid is written once it runs.
	script := "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + "; wait"
	cfg, err := json.Marshal(helperClient{Home: e.home, Key: e.keyPath, Host: srv.host, Port: srv.port, KnownHosts: e.knownHosts, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	client := exec.Command(os.Args[0], "-test.run=^TestHelperClient$", "-test.count=1")
	client.Env = append(os.Environ(), clientEnv+"="+string(cfg))
	out := &strings.Builder{}
	client.Stdout, client.Stderr = out, out
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	defer client.Process.Kill()
	waitFile(t, pidFile)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !alive(pid) {
		t.Fatalf("the command's child %q is not running (%v)", b, err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	if err := client.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	client.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's child (pid %d) still runs 30 s after its client was killed\nclient: %s", pid, out)
		}
		time.Sleep(100 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// alive reports whether pid is a process that has not ended (a zombie
// has ended).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// TestHelperClient is the client TestCommandDiesWithItsClient kills: it
// runs its Script on the server and waits.
func TestHelperClient(t *testing.T) {
	raw := os.Getenv(clientEnv)
	if raw == "" {
		t.Skip("run by TestCommandDiesWithItsClient")
	}
	var cfg helperClient
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{home: cfg.Home, keyPath: cfg.Key, knownHosts: cfg.KnownHosts}
	opts := e.options()
	opts.Hosts["node"] = HostConfig{HostName: cfg.Host, Port: cfg.Port, IdentityFiles: []string{cfg.Key}}
	d, err := NewDialer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := d.Dial(ctx, "node")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Run(ctx, transport.Cmd{Script: cfg.Script})
	t.Fatalf("the command ended: %v", err)
}
