//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/ssh"
)

// internalKex is the hidden subcommand that finds out what rayform's SSH
// transport negotiates with a host. rfbench runs it in the lab's client
// namespace.
const internalKex = "internal-kex"

// algorithms is what one SSH connection negotiated (client to server).
type algorithms struct {
	Kex     string `json:"kex"`
	HostKey string `json:"host_key"`
	Cipher  string `json:"cipher"`
	MAC     string `json:"mac,omitempty"` // empty for AEAD ciphers
	Server  string `json:"server"`        // the server's version line
}

// sshOptions are the OpenSSH -o options that make ssh negotiate the same.
func (a algorithms) sshOptions() []string {
	opts := []string{"-o", "KexAlgorithms=" + a.Kex, "-o", "HostKeyAlgorithms=" + a.HostKey, "-o", "Ciphers=" + a.Cipher}
	if a.MAC != "" {
		opts = append(opts, "-o", "MACs="+a.MAC)
	}
	return opts
}

// String is a one-line summary for the report.
func (a algorithms) String() string {
	s := fmt.Sprintf("kex %s, host key %s, cipher %s", a.Kex, a.HostKey, a.Cipher)
	if a.MAC != "" {
		s += ", MAC " + a.MAC
	}
	return s
}

// runKexHelper dials one host with rayform's own SSH transport (the options
// rayform plan gives it for a node), records the bytes of the handshake and
// prints, as JSON, the algorithms the two KEXINIT messages agree on.
func runKexHelper(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(internalKex, flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "HOME whose ~/.ssh/config is read")
	name := fs.String("name", "probe", "node name (looked up in ~/.ssh/config as rayform does)")
	host := fs.String("host", "", "address to dial")
	user := fs.String("user", "root", "user")
	key := fs.String("key", "", "identity file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	algos, err := negotiate(ctx, *home, *name, *host, *user, *key)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", internalKex, err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(algos); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", internalKex, err)
		return 1
	}
	return 0
}

// negotiate connects to node name at host as rayform does and reads the result of the
// algorithm negotiation from the two KEXINIT messages (sent in the clear).
func negotiate(ctx context.Context, home, name, host, user, key string) (algorithms, error) {
	rec := &recorder{}
	d, err := ssh.NewDialer(ssh.Options{
		Hosts:       map[string]ssh.HostConfig{name: {HostName: host, User: user, IdentityFiles: []string{key}}},
		Home:        home,
		AgentSocket: "none",
		NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return rec.wrap(c), nil
		},
	})
	if err != nil {
		return algorithms{}, fmt.Errorf("ssh dialer: %w", err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := d.Dial(ctx, name)
	if err != nil {
		return algorithms{}, fmt.Errorf("dial %s: %w", host, err)
	}
	defer conn.Close()
	if _, err := conn.Run(ctx, transport.Cmd{Argv: []string{"true"}}); err != nil {
		return algorithms{}, fmt.Errorf("run true on %s: %w", host, err)
	}
	written, read := rec.bytes()
	client, _, err := readKexInit(written)
	if err != nil {
		return algorithms{}, fmt.Errorf("client KEXINIT: %w", err)
	}
	server, version, err := readKexInit(read)
	if err != nil {
		return algorithms{}, fmt.Errorf("server KEXINIT: %w", err)
	}
	a, err := agree(client, server)
	a.Server = version
	return a, err
}

// recorder keeps the first bytes written to and read from a connection.
type recorder struct {
	mu          sync.Mutex
	wrote, read bytes.Buffer
}

// recordLimit is enough for the version lines and both KEXINIT messages.
const recordLimit = 64 << 10

func (r *recorder) wrap(c net.Conn) net.Conn { return &recordedConn{Conn: c, r: r} }

func (r *recorder) bytes() (written, read []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.wrote.Bytes()), slices.Clone(r.read.Bytes())
}

type recordedConn struct {
	net.Conn
	r *recorder
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.r.mu.Lock()
	if c.r.read.Len() < recordLimit {
		c.r.read.Write(p[:n])
	}
	c.r.mu.Unlock()
	return n, err
}

func (c *recordedConn) Write(p []byte) (int, error) {
	c.r.mu.Lock()
	if c.r.wrote.Len() < recordLimit {
		c.r.wrote.Write(p)
	}
	c.r.mu.Unlock()
	return c.Conn.Write(p)
}

// kexInit is the algorithm name-lists of an SSH_MSG_KEXINIT (RFC 4253
// section 7.1), client-to-server direction only.
type kexInit struct {
	Kex, HostKey, Cipher, MAC []string
}

// readKexInit skips the identification lines at the start of an SSH stream
// and decodes the first binary packet, which must be the KEXINIT. It
// returns the peer's version line too.
func readKexInit(stream []byte) (kexInit, string, error) {
	var version string
	for {
		i := bytes.IndexByte(stream, '\n')
		if i < 0 {
			return kexInit{}, "", errors.New("no SSH identification line")
		}
		line := strings.TrimRight(string(stream[:i]), "\r")
		stream = stream[i+1:]
		if strings.HasPrefix(line, "SSH-") {
			version = line
			break
		}
	}
	if len(stream) < 6 {
		return kexInit{}, version, errors.New("stream ends before the first packet")
	}
	length := binary.BigEndian.Uint32(stream)
	pad := int(stream[4])
	if int(length) > len(stream)-4 || int(length) < pad+2 {
		return kexInit{}, version, fmt.Errorf("first packet of %d bytes is truncated or malformed", length)
	}
	payload := stream[5 : 4+int(length)-pad]
	const msgKexInit = 20
	if payload[0] != msgKexInit {
		return kexInit{}, version, fmt.Errorf("first packet is message %d, not KEXINIT", payload[0])
	}
	rest := payload[1:]
	if len(rest) < 16 {
		return kexInit{}, version, errors.New("KEXINIT truncated")
	}
	rest = rest[16:] // cookie
	var lists [10][]string
	for i := range lists {
		if len(rest) < 4 {
			return kexInit{}, version, errors.New("KEXINIT name-list truncated")
		}
		n := binary.BigEndian.Uint32(rest)
		if int(n) > len(rest)-4 {
			return kexInit{}, version, errors.New("KEXINIT name-list truncated")
		}
		if n > 0 {
			lists[i] = strings.Split(string(rest[4:4+n]), ",")
		}
		rest = rest[4+n:]
	}
	// kex, host key, cipher c→s, cipher s→c, MAC c→s, MAC s→c, ...
	return kexInit{Kex: lists[0], HostKey: lists[1], Cipher: lists[2], MAC: lists[4]}, version, nil
}

// aeadCiphers carry their own integrity: no MAC is negotiated for them.
var aeadCiphers = []string{"aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com"}

// agree applies SSH's rule (RFC 4253 section 7.1): for each list, the
// first algorithm of the client's that the server also lists.
func agree(client, server kexInit) (algorithms, error) {
	var a algorithms
	var err error
	pick := func(what string, c, s []string) string {
		for _, x := range c {
			if slices.Contains(s, x) {
				return x
			}
		}
		if err == nil {
			err = fmt.Errorf("no common %s algorithm (client %v, server %v)", what, c, s)
		}
		return ""
	}
	a.Kex = pick("key exchange", client.Kex, server.Kex)
	a.HostKey = pick("host key", client.HostKey, server.HostKey)
	a.Cipher = pick("cipher", client.Cipher, server.Cipher)
	if !slices.Contains(aeadCiphers, a.Cipher) {
		a.MAC = pick("MAC", client.MAC, server.MAC)
	}
	return a, err
}
