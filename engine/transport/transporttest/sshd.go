package transporttest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"
)

// SSHDPath is where the OpenSSH server is expected.
const SSHDPath = "/usr/sbin/sshd"

// RequireSSHD skips the test unless it runs as root with OpenSSH's sshd
// installed (CI runs as root with openssh-server, so these tests run there).
func RequireSSHD(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a real sshd (StrictModes, privilege separation)")
	}
	if _, err := os.Stat(SSHDPath); err != nil {
		t.Skipf("needs OpenSSH server at %s: %v", SSHDPath, err)
	}
}

// SSHDOptions configures StartSSHD.
type SSHDOptions struct {
	// Netns runs sshd inside this network namespace (ip netns exec).
	Netns string
	// ListenAddr is the address to listen on; default 127.0.0.1.
	ListenAddr string
	// Port to listen on; default a free port (22 inside a namespace).
	Port int
	// AuthorizedKeys are the client keys accepted for every user.
	AuthorizedKeys []xssh.PublicKey
	// HostKey is the server's key; a fresh ed25519 key when nil.
	HostKey *Key
	// ExtraHostKeys are offered too (of other types than HostKey).
	ExtraHostKeys []*Key
	// ExtraConfig is appended to sshd_config.
	ExtraConfig string
}

// SSHD is a real OpenSSH server started by a test.
type SSHD struct {
	Host    string // listen address
	Port    int
	Addr    string // host:port
	HostKey xssh.PublicKey
	Dir     string // config, keys and authorized_keys live here
	Netns   string
	cmd     *exec.Cmd
	log     *logBuffer
}

// logBuffer keeps sshd's log for failure reports.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartSSHD starts `sshd -D -e -f <own config>` as root with a generated
// host key, StrictModes no and AuthorizedKeysFile in a temp dir, waits until
// it listens, and stops it at the end of the test. It skips the test when
// sshd cannot run here (see RequireSSHD).
func StartSSHD(t testing.TB, opts SSHDOptions) *SSHD {
	t.Helper()
	RequireSSHD(t)
	// sshd refuses to start without its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("sshd: %v", err)
	}
	dir := t.TempDir()
	hostKey := opts.HostKey
	if hostKey == nil {
		hostKey = NewKey(t)
	}
	hostKeyLines := "HostKey " + dir + "/host_key\n"
	if err := os.WriteFile(dir+"/host_key", hostKey.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, k := range opts.ExtraHostKeys {
		p := fmt.Sprintf("%s/host_key_%d", dir, i)
		if err := os.WriteFile(p, k.PEM, 0o600); err != nil {
			t.Fatal(err)
		}
		hostKeyLines += "HostKey " + p + "\n"
	}
	var ak bytes.Buffer
	for _, k := range opts.AuthorizedKeys {
		ak.Write(xssh.MarshalAuthorizedKey(k))
	}
	if err := os.WriteFile(dir+"/authorized_keys", ak.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := opts.ListenAddr
	if listen == "" {
		listen = "127.0.0.1"
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := opts.Port
		if port == 0 && opts.Netns != "" {
			port = 22
		}
		if port == 0 {
			p, err := freePort(listen)
			if err != nil {
				t.Fatal(err)
			}
			port = p
		}
		s, err := startSSHD(t, dir, hostKeyLines, listen, port, hostKey.Signer.PublicKey(), opts)
		if err == nil {
			return s
		}
		lastErr = err
		if opts.Port != 0 || opts.Netns != "" || !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	t.Fatalf("sshd did not start: %v", lastErr)
	return nil
}

func startSSHD(t testing.TB, dir, hostKeyLines, listen string, port int, hostKey xssh.PublicKey, opts SSHDOptions) (*SSHD, error) {
	cfg := fmt.Sprintf(`Port %d
ListenAddress %s
%sPidFile none
AuthorizedKeysFile %s/authorized_keys
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
PrintMotd no
MaxStartups 100:30:200
LogLevel VERBOSE
%s
`, port, listen, hostKeyLines, dir, opts.ExtraConfig)
	cfgPath := dir + "/sshd_config"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	args := []string{SSHDPath, "-D", "-e", "-f", cfgPath}
	if opts.Netns != "" {
		args = append([]string{"ip", "netns", "exec", opts.Netns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	s := &SSHD{Host: listen, Port: port, Addr: net.JoinHostPort(listen, strconv.Itoa(port)), HostKey: hostKey, Dir: dir, Netns: opts.Netns, cmd: cmd, log: &logBuffer{}}
	// Readiness is sshd's own "Server listening" line, no polling needed.
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			s.log.add(sc.Text())
			if strings.Contains(sc.Text(), "Server listening on") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	waitErr := make(chan error, 1)
	go func() {
		waitErr <- cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		return nil, fmt.Errorf("sshd exited: %v\n%s", <-waitErr, s.log)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("sshd did not report listening within 30s\n%s", s.log)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("sshd %s log:\n%s", s.Addr, s.log)
		}
	})
	return s, nil
}

// Log returns what sshd has logged so far.
func (s *SSHD) Log() string { return s.log.String() }

// KnownHostsLine is the known_hosts line for this server.
func (s *SSHD) KnownHostsLine() string { return KnownHostsLine(s.Addr, s.HostKey) }

func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// StartAgent starts a real ssh-agent (`ssh-agent -D -a sock`), adds the key
// files with ssh-add, and returns the socket path. The agent stops at the
// end of the test. It skips the test when ssh-agent is not installed.
func StartAgent(t testing.TB, keyFiles ...string) string {
	t.Helper()
	for _, tool := range []string{"ssh-agent", "ssh-add"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	// Unix socket paths are short (108 bytes); t.TempDir can be long.
	dir, err := os.MkdirTemp("", "rft-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "agent.sock")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	// Poll until the agent accepts connections, with a deadline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("ssh-agent exited: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssh-agent socket %s not ready: %v", sock, err)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline
	}
	for _, f := range keyFiles {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		add := exec.CommandContext(ctx, "ssh-add", f)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		out, err := add.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("ssh-add %s: %v: %s", f, err, out)
		}
	}
	return sock
}
