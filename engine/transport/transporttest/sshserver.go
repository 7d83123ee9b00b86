package transporttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"
)

// SSHServerOptions configures NewSSHServer.
type SSHServerOptions struct {
	// AuthorizedKeys are the client keys accepted; any other key is refused.
	AuthorizedKeys []xssh.PublicKey
	// HostKey is the server's key; a fresh ed25519 key when nil.
	HostKey *Key
	// ExtraHostKeys are offered too (of other types than HostKey).
	ExtraHostKeys []*Key
}

// SSHServer is an in-process SSH server on 127.0.0.1 that really runs exec
// requests with /bin/sh -c as the current user, the way sshd does: the
// shell leads its own session (setsid), env requests are honoured, stdin,
// stdout and stderr are the channel's, and the exit status (or signal) is
// reported. Shells, ptys and subsystems are refused.
type SSHServer struct {
	// Addr is "127.0.0.1:port".
	Addr string
	// HostKey is the server's public host key.
	HostKey xssh.PublicKey

	config    *xssh.ServerConfig
	ln        net.Listener
	handshake atomic.Int64
	wg        sync.WaitGroup

	ignoreKeepalives atomic.Bool

	mu    sync.Mutex
	conns map[*xssh.ServerConn]bool
}

// IgnoreKeepalives makes the server stop answering global requests such as
// keepalive@openssh.com, as a hung host or a silently dropped network would.
func (s *SSHServer) IgnoreKeepalives(ignore bool) { s.ignoreKeepalives.Store(ignore) }

// NewSSHServer starts a server for the test; it stops at the end of the test.
func NewSSHServer(t testing.TB, opts SSHServerOptions) *SSHServer {
	t.Helper()
	hostKey := opts.HostKey
	if hostKey == nil {
		hostKey = NewKey(t)
	}
	authorized := map[string]bool{}
	for _, k := range opts.AuthorizedKeys {
		authorized[string(k.Marshal())] = true
	}
	cfg := &xssh.ServerConfig{
		PublicKeyCallback: func(_ xssh.ConnMetadata, key xssh.PublicKey) (*xssh.Permissions, error) {
			if authorized[string(key.Marshal())] {
				return &xssh.Permissions{}, nil
			}
			return nil, errors.New("key not authorized")
		},
	}
	cfg.AddHostKey(hostKey.Signer)
	for _, k := range opts.ExtraHostKeys {
		cfg.AddHostKey(k.Signer)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("in-process ssh server: %v", err)
	}
	s := &SSHServer{Addr: ln.Addr().String(), HostKey: hostKey.Signer.PublicKey(), config: cfg, ln: ln, conns: map[*xssh.ServerConn]bool{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

// Port returns the server's port.
func (s *SSHServer) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// Handshakes counts completed SSH handshakes.
func (s *SSHServer) Handshakes() int { return int(s.handshake.Load()) }

// DropConnections closes every live client connection (as a server restart
// or a network cut would), leaving the listener up.
func (s *SSHServer) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

func (s *SSHServer) close() {
	s.ln.Close()
	s.DropConnections()
	s.wg.Wait()
}

func (s *SSHServer) serve() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(nc)
		}()
	}
}

func (s *SSHServer) handle(nc net.Conn) {
	sc, chans, reqs, err := xssh.NewServerConn(nc, s.config)
	if err != nil {
		nc.Close()
		return
	}
	s.handshake.Add(1)
	s.mu.Lock()
	s.conns[sc] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		sc.Close()
	}()
	go func() {
		// keepalive@openssh.com and friends: reply (refusing) as sshd does.
		for r := range reqs {
			if r.WantReply && !s.ignoreKeepalives.Load() {
				_ = r.Reply(false, nil)
			}
		}
	}()
	remote := sc.RemoteAddr().(*net.TCPAddr)
	local := sc.LocalAddr().(*net.TCPAddr)
	sshConnection := fmt.Sprintf("%s %d %s %d", remote.IP, remote.Port, local.IP, local.Port)
	var wg sync.WaitGroup
	for nch := range chans {
		switch nch.ChannelType() {
		case "session":
			ch, creqs, err := nch.Accept()
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				session(ch, creqs, sshConnection)
			}()
		case "direct-tcpip":
			wg.Add(1)
			go func() {
				defer wg.Done()
				directTCPIP(nch)
			}()
		default:
			_ = nch.Reject(xssh.UnknownChannelType, "unsupported channel type")
		}
	}
	wg.Wait()
}

// directTCPIP forwards a channel to a TCP address (what ProxyJump uses).
func directTCPIP(nch xssh.NewChannel) {
	var req struct {
		Host       string
		Port       uint32
		OriginHost string
		OriginPort uint32
	}
	if err := xssh.Unmarshal(nch.ExtraData(), &req); err != nil {
		_ = nch.Reject(xssh.ConnectionFailed, "bad request")
		return
	}
	tc, err := net.Dial("tcp", net.JoinHostPort(req.Host, strconv.Itoa(int(req.Port))))
	if err != nil {
		_ = nch.Reject(xssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nch.Accept()
	if err != nil {
		tc.Close()
		return
	}
	go xssh.DiscardRequests(reqs)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(tc, ch); tc.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(ch, tc); _ = ch.CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
	ch.Close()
	tc.Close()
}

// session serves one session channel: env requests, then one exec.
func session(ch xssh.Channel, reqs <-chan *xssh.Request, sshConnection string) {
	defer ch.Close()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"USER=" + os.Getenv("USER"),
		"SHELL=/bin/sh",
		"SSH_CONNECTION=" + sshConnection,
	}
	var cmd *exec.Cmd
	for req := range reqs {
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if err := xssh.Unmarshal(req.Payload, &kv); err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			env = append(env, kv.Name+"="+kv.Value)
			_ = req.Reply(true, nil)
		case "exec":
			var p struct{ Command string }
			if err := xssh.Unmarshal(req.Payload, &p); err != nil || cmd != nil {
				_ = req.Reply(false, nil)
				continue
			}
			cmd = exec.Command("/bin/sh", "-c", p.Command)
			cmd.Env = env
			cmd.Dir = os.Getenv("HOME")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := startCmd(ch, cmd); err != nil {
				_ = req.Reply(false, nil)
				return
			}
			_ = req.Reply(true, nil)
		case "signal":
			var p struct{ Signal string }
			if err := xssh.Unmarshal(req.Payload, &p); err == nil && cmd != nil && cmd.Process != nil {
				if sig := unix.SignalNum("SIG" + p.Signal); sig != 0 {
					_ = syscall.Kill(-cmd.Process.Pid, sig)
				}
			}
			if req.WantReply {
				_ = req.Reply(true, nil)
			}
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
	// The client closed the channel. Like sshd, leave the process running:
	// its pipes are closed, so it ends when it next reads or writes.
}

// startCmd runs cmd with the channel as its stdio and reports its exit on
// the channel when it is done.
func startCmd(ch xssh.Channel, cmd *exec.Cmd) error {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(stdin, ch)
		stdin.Close()
	}()
	go func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := io.Copy(ch, stdout); err != nil {
				stdout.Close() // the client is gone: the writer gets EPIPE
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := io.Copy(ch.Stderr(), stderr); err != nil {
				stderr.Close()
			}
		}()
		wg.Wait()
		_ = cmd.Wait() // the status is in ProcessState
		var ws syscall.WaitStatus
		if cmd.ProcessState != nil {
			ws, _ = cmd.ProcessState.Sys().(syscall.WaitStatus)
		}
		switch {
		case cmd.ProcessState != nil && ws.Signaled():
			name := unix.SignalName(ws.Signal())
			if len(name) > 3 {
				name = name[3:] // "SIGTERM" → "TERM"
			}
			_, _ = ch.SendRequest("exit-signal", false, xssh.Marshal(struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}{name, false, "", ""}))
		case cmd.ProcessState != nil:
			status := make([]byte, 4)
			binary.BigEndian.PutUint32(status, uint32(cmd.ProcessState.ExitCode()))
			_, _ = ch.SendRequest("exit-status", false, status)
		}
		_ = ch.CloseWrite()
		ch.Close()
	}()
	return nil
}

// Key is a generated private key.
type Key struct {
	Signer xssh.Signer
	// PEM is the key in OpenSSH private key format.
	PEM []byte
}

// PublicKey returns the key's public half.
func (k *Key) PublicKey() xssh.PublicKey { return k.Signer.PublicKey() }

// AuthorizedKey returns the public key as an authorized_keys line.
func (k *Key) AuthorizedKey() []byte { return xssh.MarshalAuthorizedKey(k.Signer.PublicKey()) }

// NewKey returns a fresh ed25519 key.
func NewKey(t testing.TB) *Key {
	t.Helper()
	return NewKeyOf(t, "ed25519")
}

// NewKeyOf returns a fresh key of kind "ed25519", "ecdsa" (P-256) or "rsa"
// (2048 bits).
func NewKeyOf(t testing.TB, kind string) *Key {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch kind {
	case "ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case "ecdsa":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		t.Fatalf("unknown key kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	signer, err := xssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := xssh.MarshalPrivateKey(priv, "rayform-test")
	if err != nil {
		t.Fatal(err)
	}
	return &Key{Signer: signer, PEM: pem.EncodeToMemory(block)}
}

// WriteKey writes a fresh ed25519 key to dir/name (mode 0600) and its public
// half to dir/name.pub, encrypted with passphrase when it is not empty, and
// returns the private key file's path and the key.
func WriteKey(t testing.TB, dir, name, passphrase string) (string, *Key) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := xssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := xssh.MarshalPrivateKey(priv, name)
	if passphrase != "" {
		block, err = xssh.MarshalPrivateKeyWithPassphrase(priv, name, []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	k := &Key{Signer: signer, PEM: pem.EncodeToMemory(block)}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, k.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".pub", k.AuthorizedKey(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, k
}

// KnownHostsLine renders the known_hosts line for a server at addr
// ("host:port") with key, unhashed, as `ssh-keyscan` prints it.
func KnownHostsLine(addr string, key xssh.PublicKey) string {
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)
}
