package ssh

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

// runEcho dials host and runs one command, returning the dial or run error.
func runEcho(t *testing.T, d *Dialer, host string) error {
	t.Helper()
	c, err := d.Dial(testCtx(t), host)
	if err != nil {
		return err
	}
	res, err := c.Run(testCtx(t), transport.Cmd{Argv: []string{"echo", "hello"}})
	if err != nil {
		return err
	}
	if string(res.Stdout) != "hello\n" {
		t.Errorf("echo returned %q", res.Stdout)
	}
	return nil
}

func TestHostKeys(t *testing.T) {
	tests := []struct {
		name string
		// known is what known_hosts holds before the dial: "none", "right" or
		// "wrong" (another key for the same address).
		known    string
		trustNew bool
		strict   string // HostConfig.StrictHostKeyChecking
		wantErr  error
		notErr   error
		wantMsg  []string
		recorded bool // the server's key is in known_hosts afterwards
	}{
		{name: "known key", known: "right", recorded: true},
		{name: "unknown host", known: "none", wantErr: transport.ErrUnknownHostKey, notErr: transport.ErrHostKeyMismatch,
			wantMsg: []string{"ssh-keyscan -H -p ", "-trust-new-hosts", "SHA256:"}},
		{name: "mismatched key", known: "wrong", wantErr: transport.ErrHostKeyMismatch, notErr: transport.ErrUnknownHostKey,
			wantMsg: []string{"man-in-the-middle", "ssh-keygen -R", "known_hosts:1 has"}},
		{name: "trust new records key", known: "none", trustNew: true, recorded: true},
		{name: "accept-new from config records key", known: "none", strict: "accept-new", recorded: true},
		{name: "trust new never accepts a changed key", known: "wrong", trustNew: true, wantErr: transport.ErrHostKeyMismatch},
	}
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					e := newEnv(t)
					srv := startServer(t, kind, serverOpts{}, e.key.PublicKey())
					switch tt.known {
					case "right":
						e.trust(t, srv.addr, srv.hostKey)
					case "wrong":
						e.trust(t, srv.addr, transporttest.NewKey(t).PublicKey())
					}
					opts := e.options()
					opts.TrustNewHosts = tt.trustNew
					hc := e.hostConfig(srv)
					hc.StrictHostKeyChecking = tt.strict
					opts.Hosts["node"] = hc
					err := runEcho(t, newDialer(t, opts), "node")
					if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					if tt.notErr != nil && errors.Is(err, tt.notErr) {
						t.Errorf("err = %v, must not be %v", err, tt.notErr)
					}
					for _, m := range tt.wantMsg {
						if !strings.Contains(err.Error(), m) {
							t.Errorf("error %q lacks %q", err, m)
						}
					}
					if err != nil && !strings.HasPrefix(err.Error(), "node: ") {
						t.Errorf("error %q does not start with the host", err)
					}
					kh, _ := os.ReadFile(e.knownHosts)
					want := transporttest.KnownHostsLine(srv.addr, srv.hostKey)
					if got := strings.Contains(string(kh), want); got != tt.recorded {
						t.Errorf("server key in known_hosts: %v, want %v\n%s", got, tt.recorded, kh)
					}
					if tt.trustNew || tt.strict != "" {
						// A strict dialer now accepts the recorded key.
						strict := e.options()
						strict.Hosts["node"] = e.hostConfig(srv)
						if err := runEcho(t, newDialer(t, strict), "node"); (err == nil) != tt.recorded {
							t.Errorf("strict dial after recording: %v", err)
						}
					}
				})
			}
		})
	}
}

// TestHostKeyAlgorithmsFromKnownHosts: a server offering ECDSA and ed25519
// keys, on record with only its ed25519 key. x/crypto prefers ECDSA, so
// without negotiating from known_hosts the dial would fail as a mismatch.
func TestHostKeyAlgorithmsFromKnownHosts(t *testing.T) {
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t)
			ed := transporttest.NewKeyOf(t, "ed25519")
			ec := transporttest.NewKeyOf(t, "ecdsa")
			srv := startServer(t, kind, serverOpts{hostKey: ed, extraKeys: []*transporttest.Key{ec}}, e.key.PublicKey())
			e.trust(t, srv.addr, ed.PublicKey())
			opts := e.options()
			opts.Hosts["node"] = e.hostConfig(srv)
			if err := runEcho(t, newDialer(t, opts), "node"); err != nil {
				t.Fatalf("dial with ed25519 on record: %v", err)
			}
			// Control: the server really leads with ECDSA when the client
			// has no preference.
			var got xssh.PublicKey
			cfg := &xssh.ClientConfig{
				User: "root",
				Auth: []xssh.AuthMethod{xssh.PublicKeys(e.key.Signer)},
				HostKeyCallback: func(_ string, _ net.Addr, k xssh.PublicKey) error {
					got = k
					return errors.New("stop")
				},
			}
			_, _ = xssh.Dial("tcp", srv.addr, cfg)
			if got == nil || got.Type() != xssh.KeyAlgoECDSA256 {
				t.Errorf("without preference the server presented %v, want ECDSA (else this test proves nothing)", got)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	tests := []struct {
		name string
		// setup returns the HostConfig and the agent socket for the dial.
		setup   func(t *testing.T, e *testEnv, srv testServer) (HostConfig, string)
		wantErr error
		wantMsg string
	}{
		{
			name: "identity file",
			setup: func(t *testing.T, e *testEnv, srv testServer) (HostConfig, string) {
				return e.hostConfig(srv), "none"
			},
		},
		{
			name: "ssh-agent",
			setup: func(t *testing.T, e *testEnv, srv testServer) (HostConfig, string) {
				sock := transporttest.StartAgent(t, e.keyPath)
				hc := e.hostConfig(srv)
				hc.IdentityFiles = []string{e.home + "/.ssh/no-such-key"}
				return hc, sock
			},
		},
		{
			name: "wrong key",
			setup: func(t *testing.T, e *testEnv, srv testServer) (HostConfig, string) {
				other, _ := transporttest.WriteKey(t, t.TempDir(), "id_other", "")
				hc := e.hostConfig(srv)
				hc.IdentityFiles = []string{other}
				return hc, "none"
			},
			wantErr: transport.ErrAuthFailed,
			wantMsg: "id_other",
		},
		{
			name: "encrypted key without agent",
			setup: func(t *testing.T, e *testEnv, srv testServer) (HostConfig, string) {
				hc := e.hostConfig(srv)
				hc.IdentityFiles = []string{encryptedAuthorizedKey(t, e, srv)}
				return hc, "none"
			},
			wantErr: transport.ErrAuthFailed,
			wantMsg: "is encrypted and ssh-agent does not hold it: run `ssh-add",
		},
		{
			name: "encrypted key held by the agent",
			setup: func(t *testing.T, e *testEnv, srv testServer) (HostConfig, string) {
				hc := e.hostConfig(srv)
				hc.IdentityFiles = []string{encryptedAuthorizedKey(t, e, srv)}
				sock := transporttest.StartAgent(t)
				addToAgent(t, sock, hc.IdentityFiles[0], "pass phrase")
				return hc, sock
			},
		},
	}
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					e := newEnv(t)
					srv := startServer(t, kind, serverOpts{}, e.key.PublicKey())
					e.trust(t, srv.addr, srv.hostKey)
					hc, sock := tt.setup(t, e, srv)
					opts := e.options()
					opts.AgentSocket = sock
					opts.Hosts["node"] = hc
					err := runEcho(t, newDialer(t, opts), "node")
					if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
						t.Errorf("error %q lacks %q", err, tt.wantMsg)
					}
				})
			}
		})
	}
}

// encryptedAuthorizedKey writes a passphrase-protected key that the server
// accepts (sshd rereads authorized_keys; the in-process server cannot, so
// the key is the env's own key re-encrypted).
func encryptedAuthorizedKey(t *testing.T, e *testEnv, srv testServer) string {
	t.Helper()
	raw, err := xssh.ParseRawPrivateKey(e.key.PEM)
	if err != nil {
		t.Fatal(err)
	}
	block, err := xssh.MarshalPrivateKeyWithPassphrase(raw, "enc", []byte("pass phrase"))
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/id_encrypted"
	if err := os.WriteFile(path, pemEncode(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// addToAgent decrypts an identity file and adds it to the agent (what
// `ssh-add` does after asking for the passphrase).
func addToAgent(t *testing.T, sock, path, passphrase string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := xssh.ParseRawPrivateKeyWithPassphrase(data, []byte(passphrase))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := agent.NewClient(c).Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
}

func TestUnreachable(t *testing.T) {
	// A port nothing listens on: bind one, note it, close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	e := newEnv(t)
	opts := e.options()
	opts.Hosts["node"] = HostConfig{HostName: "127.0.0.1", Port: port, IdentityFiles: []string{e.keyPath}}
	_, err = newDialer(t, opts).Dial(testCtx(t), "node")
	if !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	if want := "node: connect "; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Errorf("error %q should start with %q and name the port", err, want)
	}
}

func TestDialCancelled(t *testing.T) {
	e := newEnv(t)
	opts := e.options()
	opts.Hosts["node"] = HostConfig{HostName: "127.0.0.1", Port: 1, IdentityFiles: []string{e.keyPath}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newDialer(t, opts).Dial(ctx, "node")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestTrustNewHostsConcurrent: several dialers (as several rayform runs
// would) meet the same new host at once; known_hosts gets its key once.
func TestTrustNewHostsConcurrent(t *testing.T) {
	e := newEnv(t)
	srv := startServer(t, "inprocess", serverOpts{}, e.key.PublicKey())
	opts := e.options()
	opts.TrustNewHosts = true
	opts.Hosts["node"] = e.hostConfig(srv)
	const n = 6
	errs := make(chan error, n)
	for range n {
		d := newDialer(t, opts)
		go func() {
			_, err := d.Dial(testCtx(t), "node")
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	kh, err := os.ReadFile(e.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(kh), transporttest.KnownHostsLine(srv.addr, srv.hostKey)); got != 1 {
		t.Errorf("known_hosts holds the key %d times, want 1:\n%s", got, kh)
	}
	if st, err := os.Stat(e.knownHosts); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("known_hosts mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
}
