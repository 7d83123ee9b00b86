package ssh

import (
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

// testEnv is a private home directory with a client key, its own
// known_hosts and no ssh config, agent or system files, so tests never read
// the real ~/.ssh.
type testEnv struct {
	home       string
	keyPath    string
	key        *transporttest.Key
	knownHosts string
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	path, key := transporttest.WriteKey(t, filepath.Join(home, ".ssh"), "id_test", "")
	return &testEnv{home: home, keyPath: path, key: key, knownHosts: filepath.Join(home, ".ssh", "known_hosts")}
}

// trust records a server's key in the env's known_hosts.
func (e *testEnv) trust(t testing.TB, addr string, key xssh.PublicKey) {
	t.Helper()
	f, err := os.OpenFile(e.knownHosts, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(transporttest.KnownHostsLine(addr, key) + "\n"); err != nil {
		t.Fatal(err)
	}
}

// options returns Options isolated to the env; hosts are added by callers.
func (e *testEnv) options() Options {
	return Options{
		Home:             e.home,
		ConfigFile:       "none",
		SystemConfigFile: "none",
		AgentSocket:      "none",
		Hosts:            map[string]HostConfig{},
		KillGrace:        time.Second,
	}
}

func newDialer(t testing.TB, opts Options) *Dialer {
	t.Helper()
	d, err := NewDialer(opts)
	if err != nil {
		t.Fatalf("NewDialer: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// testServer is one SSH server implementation the tests run against.
type testServer struct {
	addr    string
	host    string
	port    int
	hostKey xssh.PublicKey
}

// serverKinds are the servers every SSH behaviour is checked against: the
// in-process x/crypto server and the real OpenSSH sshd.
var serverKinds = []string{"inprocess", "openssh"}

// serverOpts configures startServer.
type serverOpts struct {
	hostKey   *transporttest.Key   // default a fresh ed25519 key
	extraKeys []*transporttest.Key // more host keys
}

// startServer starts a server of kind accepting keys (skipping the test if
// kind cannot run here).
func startServer(t testing.TB, kind string, o serverOpts, keys ...xssh.PublicKey) testServer {
	t.Helper()
	switch kind {
	case "inprocess":
		s := transporttest.NewSSHServer(t, transporttest.SSHServerOptions{AuthorizedKeys: keys, HostKey: o.hostKey, ExtraHostKeys: o.extraKeys})
		return testServer{addr: s.Addr, host: "127.0.0.1", port: s.Port(), hostKey: s.HostKey}
	case "openssh":
		s := transporttest.StartSSHD(t, transporttest.SSHDOptions{AuthorizedKeys: keys, HostKey: o.hostKey, ExtraHostKeys: o.extraKeys})
		return testServer{addr: s.Addr, host: s.Host, port: s.Port, hostKey: s.HostKey}
	}
	t.Fatalf("unknown server kind %q", kind)
	return testServer{}
}

// hostConfig points a node at srv with the env's key.
func (e *testEnv) hostConfig(srv testServer) HostConfig {
	return HostConfig{HostName: srv.host, Port: srv.port, IdentityFiles: []string{e.keyPath}}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustDial(t testing.TB, d *Dialer, host string) transport.Conn {
	t.Helper()
	c, err := d.Dial(testCtx(t), host)
	if err != nil {
		t.Fatalf("Dial(%s): %v", host, err)
	}
	return c
}

func pemEncode(b *pem.Block) []byte { return pem.EncodeToMemory(b) }

// benchEnv starts n servers of kind named node-0..node-n-1 and returns
// Options that reach them.
func benchEnv(b *testing.B, kind string, n int) (*testEnv, Options) {
	b.Helper()
	e := newEnv(b)
	opts := e.options()
	for i := range n {
		srv := startServer(b, kind, serverOpts{}, e.key.PublicKey())
		e.trust(b, srv.addr, srv.hostKey)
		opts.Hosts[fmt.Sprintf("node-%d", i)] = e.hostConfig(srv)
	}
	return e, opts
}
