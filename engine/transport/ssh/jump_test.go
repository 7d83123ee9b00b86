package ssh

import (
	"context"
	"errors"
	"fmt"
	xssh "golang.org/x/crypto/ssh"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

// netnsCounter numbers this process's namespaces (rft-<pid>-<n>). It is a
// test-only counter, not state of the package.
var netnsCounter atomic.Int64

// newNetns creates a network namespace with loopback up and deletes it at
// the end of the test.
func newNetns(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("rft-%d-%d", os.Getpid(), netnsCounter.Add(1))
	ipCmd(t, "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	ipCmd(t, "-n", name, "link", "set", "lo", "up")
	return name
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// link connects namespaces a and b with a veth pair created inside a (the
// root namespace never sees it) and gives each end an address.
func link(t *testing.T, a, aIf, aAddr, b, bIf, bAddr string) {
	t.Helper()
	ipCmd(t, "-n", a, "link", "add", aIf, "type", "veth", "peer", "name", bIf, "netns", b)
	ipCmd(t, "-n", a, "addr", "add", aAddr, "dev", aIf)
	ipCmd(t, "-n", b, "addr", "add", bAddr, "dev", bIf)
	ipCmd(t, "-n", a, "link", "set", aIf, "up")
	ipCmd(t, "-n", b, "link", "set", bIf, "up")
}

// netnsDial returns a dial function whose sockets are created inside the
// namespace ns: each dial runs on a goroutine locked to an OS thread that
// joins ns and is discarded afterwards (never unlocked).
func netnsDial(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // not unlocked: the thread dies with the goroutine
			f, err := os.Open("/run/netns/" + ns)
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// TestProxyJumpThroughNamespaces builds
//
//	client 10.250.1.1 ── 10.250.1.2 bastion 10.250.2.1 ── 10.250.2.2 target
//
// in three namespaces (no forwarding on the bastion, nothing in the root
// namespace), runs real sshd on bastion and target, and checks that the
// client cannot reach the target directly but can through ProxyJump — also
// through a two-hop chain to the target's loopback.
func TestProxyJumpThroughNamespaces(t *testing.T) {
	transporttest.RequireSSHD(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	client, bastion, target := newNetns(t), newNetns(t), newNetns(t)
	link(t, client, "c0", "10.250.1.1/24", bastion, "b0", "10.250.1.2/24")
	link(t, bastion, "b1", "10.250.2.1/24", target, "t0", "10.250.2.2/24")
	if out, err := exec.Command("ip", "netns", "exec", bastion, "sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_forward").CombinedOutput(); err != nil {
		t.Fatalf("disable forwarding on the bastion: %v: %s", err, out)
	}

	e := newEnv(t)
	bsshd := transporttest.StartSSHD(t, transporttest.SSHDOptions{Netns: bastion, ListenAddr: "10.250.1.2", AuthorizedKeys: []xssh.PublicKey{e.key.PublicKey()}})
	tsshd := transporttest.StartSSHD(t, transporttest.SSHDOptions{Netns: target, ListenAddr: "10.250.2.2", AuthorizedKeys: []xssh.PublicKey{e.key.PublicKey()},
		ExtraConfig: "ListenAddress 127.0.0.1"})
	e.trust(t, bsshd.Addr, bsshd.HostKey)
	e.trust(t, tsshd.Addr, tsshd.HostKey)
	e.trust(t, "127.0.0.1:22", tsshd.HostKey) // the target seen on its own loopback

	opts := e.options()
	opts.NetDial = netnsDial(client)
	key := []string{e.keyPath}
	opts.Hosts = map[string]HostConfig{
		"bastion":   {HostName: "10.250.1.2", User: "root", IdentityFiles: key},
		"target":    {HostName: "10.250.2.2", User: "root", IdentityFiles: key, ProxyJump: "bastion"},
		"direct":    {HostName: "10.250.2.2", User: "root", IdentityFiles: key},
		"target-lo": {HostName: "127.0.0.1", User: "root", IdentityFiles: key, ProxyJump: "bastion,target"},
	}
	d := newDialer(t, opts)
	ctx := testCtx(t)

	// Positive control: the client namespace reaches the bastion directly.
	if c, err := netnsDial(client)(ctx, "tcp", "10.250.1.2:22"); err != nil {
		t.Fatalf("client cannot reach the bastion: %v", err)
	} else {
		c.Close()
	}
	// The target is not reachable from the client namespace...
	if c, err := netnsDial(client)(ctx, "tcp", "10.250.2.2:22"); err == nil {
		c.Close()
		t.Fatal("client reached the target directly; the topology is wrong")
	}
	if _, err := d.Dial(ctx, "direct"); !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("direct dial of the target: %v, want ErrUnreachable", err)
	}

	// ...but it is through the bastion: the target sees the bastion's
	// address as the client.
	tests := []struct {
		host     string
		wantFrom string
	}{
		{"target", "10.250.2.1 "},
		{"target-lo", "127.0.0.1 "},
	}
	for _, tt := range tests {
		c, err := d.Dial(ctx, tt.host)
		if err != nil {
			t.Fatalf("Dial(%s) through the jump host: %v", tt.host, err)
		}
		res, err := c.Run(ctx, transport.Cmd{Script: `echo "$SSH_CONNECTION"`})
		if err != nil {
			t.Fatalf("%s: %v", tt.host, err)
		}
		if !strings.HasPrefix(string(res.Stdout), tt.wantFrom) {
			t.Errorf("%s: SSH_CONNECTION = %q, want it to come from %q", tt.host, res.Stdout, tt.wantFrom)
		}
		// The command really ran in the target namespace.
		res, err = c.Run(ctx, transport.Cmd{Argv: []string{"readlink", "/proc/self/ns/net"}})
		want, _ := os.Readlink("/proc/self/ns/net")
		if err != nil || string(res.Stdout) == want+"\n" {
			t.Errorf("%s: command ran in netns %q (err %v), want the target's, not the test's %q", tt.host, res.Stdout, err, want)
		}
		if s := c.Stats(); s.Handshakes != 1 {
			t.Errorf("%s: %d handshakes", tt.host, s.Handshakes)
		}
	}
	// Both targets share the one bastion connection.
	if got := len(d.jumps); got != 2 {
		t.Errorf("dialer holds %d jump connections, want 2 (bastion, bastion>target)", got)
	}
	if n := strings.Count(bsshd.Log(), "Accepted publickey"); n != 1 {
		t.Errorf("bastion accepted %d logins, want 1 shared connection", n)
	}
}
