package ssh

import (
	"context"
	"errors"
	"fmt"
	"github.com/hashicorp/go-hclog"
	xssh "golang.org/x/crypto/ssh"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

// TestOneHandshakeFor32Commands: 32 commands, half of them concurrent
// (beyond the session cap), share one connection.
func TestOneHandshakeFor32Commands(t *testing.T) {
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t)
			srv := startServer(t, kind, serverOpts{}, e.key.PublicKey())
			e.trust(t, srv.addr, srv.hostKey)
			opts := e.options()
			opts.Hosts["node"] = e.hostConfig(srv)
			d := newDialer(t, opts)
			c := mustDial(t, d, "node")
			for i := range 16 {
				if _, err := c.Run(testCtx(t), transport.Cmd{Argv: []string{"echo", fmt.Sprint(i)}}); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, 16)
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Dial again each time: the Dialer hands out the same Conn.
					c2, err := d.Dial(testCtx(t), "node")
					if err == nil {
						_, err = c2.Run(testCtx(t), transport.Cmd{Argv: []string{"true"}})
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if s := c.Stats(); s.Handshakes != 1 || s.RoundTrips != 32 {
				t.Errorf("Stats = %+v, want 1 handshake and 32 round trips", s)
			}
		})
	}
}

func TestReconnectAfterDrop(t *testing.T) {
	e := newEnv(t)
	srv := transporttest.NewSSHServer(t, transporttest.SSHServerOptions{AuthorizedKeys: []xssh.PublicKey{e.key.PublicKey()}})
	e.trust(t, srv.Addr, srv.HostKey)
	opts := e.options()
	opts.Hosts["node"] = HostConfig{HostName: "127.0.0.1", Port: srv.Port(), IdentityFiles: []string{e.keyPath}}
	c := mustDial(t, newDialer(t, opts), "node")
	for round := 1; round <= 3; round++ {
		res, err := c.Run(testCtx(t), transport.Cmd{Argv: []string{"echo", "ok"}})
		if err != nil || string(res.Stdout) != "ok\n" {
			t.Fatalf("round %d: %q, %v", round, res.Stdout, err)
		}
		if got := c.Stats().Handshakes; got != round {
			t.Errorf("round %d: %d handshakes, want %d", round, got, round)
		}
		srv.DropConnections()
	}
	if got := srv.Handshakes(); got != 3 {
		t.Errorf("server saw %d handshakes, want 3", got)
	}
}

// TestReconnectAfterDropOpenSSH kills the sshd process serving the
// connection between two commands.
func TestReconnectAfterDropOpenSSH(t *testing.T) {
	e := newEnv(t)
	srv := startServer(t, "openssh", serverOpts{}, e.key.PublicKey())
	e.trust(t, srv.addr, srv.hostKey)
	opts := e.options()
	opts.Hosts["node"] = e.hostConfig(srv)
	c := mustDial(t, newDialer(t, opts), "node")
	// The session's parent is sshd's unprivileged per-connection process
	// ("sshd: root@notty"), which holds the connection's socket.
	res, err := c.Run(testCtx(t), transport.Cmd{Script: `echo $PPID`})
	if err != nil {
		t.Fatal(err)
	}
	connProc := strings.TrimSpace(string(res.Stdout))
	comm, _ := os.ReadFile("/proc/" + connProc + "/comm")
	if !strings.HasPrefix(string(comm), "sshd") {
		t.Fatalf("process %s is %q, not sshd", connProc, comm)
	}
	if _, err := (transporttest.LocalHost{}).Shell(testCtx(t), "kill -KILL "+connProc); err != nil {
		t.Fatal(err)
	}
	res, err = c.Run(testCtx(t), transport.Cmd{Argv: []string{"echo", "again"}})
	if err != nil || string(res.Stdout) != "again\n" {
		t.Fatalf("after the drop: %q, %v", res.Stdout, err)
	}
	if got := c.Stats().Handshakes; got != 2 {
		t.Errorf("%d handshakes, want 2 (one reconnect)", got)
	}
}

// TestDropDuringCommand: a connection lost while a command runs is
// ErrDisconnected (the command's outcome is unknown), not retried.
func TestDropDuringCommand(t *testing.T) {
	e := newEnv(t)
	srv := transporttest.NewSSHServer(t, transporttest.SSHServerOptions{AuthorizedKeys: []xssh.PublicKey{e.key.PublicKey()}})
	e.trust(t, srv.Addr, srv.HostKey)
	opts := e.options()
	opts.Hosts["node"] = HostConfig{HostName: "127.0.0.1", Port: srv.Port(), IdentityFiles: []string{e.keyPath}}
	c := mustDial(t, newDialer(t, opts), "node")
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		// read blocks on stdin, which ends when the connection does.
		_, err := c.Run(testCtx(t), transport.Cmd{Script: "echo started > " + dir + "/started; read x", Stdin: blockingReader{}})
		done <- err
	}()
	waitFile(t, dir+"/started")
	srv.DropConnections()
	err := <-done
	if !errors.Is(err, transport.ErrDisconnected) {
		t.Fatalf("err = %v, want ErrDisconnected", err)
	}
	if got := c.Stats().RoundTrips; got != 1 {
		t.Errorf("%d round trips, want 1 (no retry of a command that may have run)", got)
	}
}

// blockingReader never returns data (a stdin that stays open).
type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { select {} }

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// TestKeepaliveClosesDeadConnection: when the server stops answering
// keepalives, the connection is closed after ServerAliveCountMax intervals,
// and the next command reconnects.
func TestKeepaliveClosesDeadConnection(t *testing.T) {
	e := newEnv(t)
	srv := transporttest.NewSSHServer(t, transporttest.SSHServerOptions{AuthorizedKeys: []xssh.PublicKey{e.key.PublicKey()}})
	e.trust(t, srv.Addr, srv.HostKey)
	opts := e.options()
	opts.Hosts["node"] = HostConfig{HostName: "127.0.0.1", Port: srv.Port(), IdentityFiles: []string{e.keyPath},
		ServerAliveInterval: 20 * time.Millisecond, ServerAliveCountMax: 2}
	c := mustDial(t, newDialer(t, opts), "node").(*Conn)
	c.mu.Lock()
	first := c.cl
	c.mu.Unlock()
	srv.IgnoreKeepalives(true)
	select {
	case <-first.dead:
	case <-testCtx(t).Done():
		t.Fatal("connection never closed although keepalives went unanswered")
	}
	srv.IgnoreKeepalives(false)
	if _, err := c.Run(testCtx(t), transport.Cmd{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Handshakes; got != 2 {
		t.Errorf("%d handshakes, want 2", got)
	}
}

func TestRunWaitsForSessionSlot(t *testing.T) {
	// With MaxSessions 1, a second command waits for the first; a ctx that
	// ends while waiting returns without running anything.
	e := newEnv(t)
	srv := transporttest.NewSSHServer(t, transporttest.SSHServerOptions{AuthorizedKeys: []xssh.PublicKey{e.key.PublicKey()}})
	e.trust(t, srv.Addr, srv.HostKey)
	opts := e.options()
	opts.MaxSessions = 1
	opts.Hosts["node"] = HostConfig{HostName: "127.0.0.1", Port: srv.Port(), IdentityFiles: []string{e.keyPath}}
	c := mustDial(t, newDialer(t, opts), "node")
	dir := t.TempDir()
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := c.Run(testCtx(t), transport.Cmd{Script: "echo x > " + dir + "/running; cat >/dev/null", Stdin: chanReader(release)})
		first <- err
	}()
	waitFile(t, dir+"/running")
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	_, err := c.Run(ctx, transport.Cmd{Script: "echo y > " + dir + "/second"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("second Run: %v, want context.Canceled while waiting for a slot", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/second"); err == nil {
		t.Errorf("the cancelled command ran")
	}
}

// chanReader returns EOF once ch is closed.
type chanReader chan struct{}

func (c chanReader) Read([]byte) (int, error) {
	<-c
	return 0, io.EOF
}

// TestDebugLogCountsCost: with a logger, handshakes and round trips are
// logged at debug level.
func TestDebugLogCountsCost(t *testing.T) {
	e := newEnv(t)
	srv := transporttest.NewSSHServer(t, transporttest.SSHServerOptions{AuthorizedKeys: []xssh.PublicKey{e.key.PublicKey()}})
	e.trust(t, srv.Addr, srv.HostKey)
	var logs strings.Builder
	opts := e.options()
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	opts.Hosts["node"] = HostConfig{HostName: "127.0.0.1", Port: srv.Port(), IdentityFiles: []string{e.keyPath}}
	c := mustDial(t, newDialer(t, opts), "node")
	if _, err := c.Run(testCtx(t), transport.Cmd{Argv: []string{"true"}, Env: map[string]string{"TOKEN": "s3cret-value"}}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for _, want := range []string{"ssh handshake: host=node", "host_key=\"ssh-ed25519 SHA256:", `run: host=node cmd=true mutating=false env=["TOKEN"] exit=0`, "round_trips=1", "connection closed: host=node", "handshakes=1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("debug log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "s3cret-value") {
		t.Errorf("debug log shows an env value:\n%s", logs.String())
	}
}
