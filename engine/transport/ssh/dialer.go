// Package ssh implements transport.Conn over SSH with golang.org/x/crypto/ssh,
// behaving like OpenSSH's client where users expect it to: host keys are
// checked against ~/.ssh/known_hosts (strictly unless asked otherwise),
// ~/.ssh/config supplies HostName, User, Port, IdentityFile, ProxyJump and
// the rest as defaults, and ssh-agent and identity files authenticate.
//
// One Dialer serves a whole run: it keeps one SSH connection per host, on
// which every command is a session (at most MaxSessions at a time), sends
// keepalives, and reconnects once when a connection dropped between
// commands. Jump host connections are shared by every host behind them.
//
// Remote hosts need a POSIX-compatible login shell (bash, dash, zsh, ksh),
// /bin/sh and /proc: every command runs under a small /bin/sh wrapper that
// receives Env over stdin and announces its process group so that a
// cancelled command can be killed (see wrapper.go). Uploads need cat, chmod
// and mv, not an SFTP subsystem.
package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	xssh "golang.org/x/crypto/ssh"

	"github.com/rayform/rayform/engine/transport"
)

// Options configures a Dialer. The zero value reads ~/.ssh/config,
// ~/.ssh/known_hosts and $SSH_AUTH_SOCK like ssh(1).
type Options struct {
	// Hosts holds explicit settings per node name (from HCL); they override
	// ~/.ssh/config, which overrides the defaults. Jump host names are
	// looked up here too.
	Hosts map[string]HostConfig
	// ConfigFile is the user ssh config; default ~/.ssh/config, "none" for
	// none. SystemConfigFile likewise defaults to /etc/ssh/ssh_config.
	ConfigFile       string
	SystemConfigFile string
	// Home replaces the home directory for ~ and the default files.
	Home string
	// KnownHostsFiles, when set, replace UserKnownHostsFile for every host.
	KnownHostsFiles []string
	// TrustNewHosts records unknown host keys in the first known_hosts file
	// instead of refusing them (StrictHostKeyChecking=accept-new, the
	// -trust-new-hosts flag). A changed key is still refused.
	TrustNewHosts bool
	// AgentSocket is the ssh-agent socket; default $SSH_AUTH_SOCK, "none"
	// for no agent.
	AgentSocket string
	// HandshakeTimeout bounds the SSH handshake (after the TCP connect,
	// which ConnectTimeout bounds); default 30s.
	HandshakeTimeout time.Duration
	// MaxSessions caps concurrent commands per connection; default 8.
	MaxSessions int
	// KillGrace is the time a cancelled command has between SIGTERM and
	// SIGKILL; default 3s.
	KillGrace time.Duration
	// NetDial opens TCP connections to first hops; default a net.Dialer.
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives debug lines for handshakes and commands.
	Logger hclog.Logger
}

// Dialer opens SSH connections to hosts by node name and keeps them for the
// whole run. It is safe for concurrent use.
type Dialer struct {
	opts     Options
	resolver *resolver
	log      hclog.Logger

	mu      sync.Mutex
	conns   map[string]*Conn
	pending map[string]*sync.Mutex
	jumps   map[string]*jumpClient // by route key
	closed  bool
}

var _ transport.Dialer = (*Dialer)(nil)

// NewDialer reads the ssh config files and returns a Dialer.
func NewDialer(opts Options) (*Dialer, error) {
	if opts.AgentSocket == "" {
		opts.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	d := &Dialer{
		opts:    opts,
		log:     opts.Logger,
		conns:   map[string]*Conn{},
		pending: map[string]*sync.Mutex{},
		jumps:   map[string]*jumpClient{},
	}
	r, err := newResolver(&d.opts)
	if err != nil {
		return nil, err
	}
	d.resolver = r
	return d, nil
}

// Resolve returns the settings Dial would use for host, without dialling.
func (d *Dialer) Resolve(host string) (Resolved, error) {
	return d.resolver.resolve(host)
}

// Dial returns the connection to host, opening it on first use; later calls
// return the same connection until it is closed.
func (d *Dialer) Dial(ctx context.Context, host string) (transport.Conn, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("%s: dial: dialer closed", host)
	}
	lock, ok := d.pending[host]
	if !ok {
		lock = &sync.Mutex{}
		d.pending[host] = lock
	}
	d.mu.Unlock()

	lock.Lock()
	defer lock.Unlock()
	d.mu.Lock()
	c, ok := d.conns[host]
	d.mu.Unlock()
	if ok && !c.isClosed() {
		return c, nil
	}
	r, err := d.resolver.resolve(host)
	if err != nil {
		return nil, err
	}
	c = newConn(d, r)
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conns[host] = c
	d.mu.Unlock()
	return c, nil
}

// Close closes every connection the Dialer opened, jump hosts included.
func (d *Dialer) Close() error {
	d.mu.Lock()
	d.closed = true
	conns := make([]*Conn, 0, len(d.conns))
	for _, c := range d.conns {
		conns = append(conns, c)
	}
	jumps := make([]*jumpClient, 0, len(d.jumps))
	for _, j := range d.jumps {
		jumps = append(jumps, j)
	}
	d.mu.Unlock()
	var errs []error
	for _, c := range conns {
		errs = append(errs, c.Close())
	}
	for _, j := range jumps {
		j.close()
	}
	return errors.Join(errs...)
}

func (d *Dialer) forget(c *Conn) {
	d.mu.Lock()
	if d.conns[c.r.Name] == c {
		delete(d.conns, c.r.Name)
	}
	d.mu.Unlock()
}

// client is one live SSH connection with its keepalive.
type client struct {
	*xssh.Client
	dead chan struct{} // closed when the connection is gone
	stop chan struct{} // closed to stop the keepalive
	once sync.Once
}

func (c *client) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

func (c *client) close() {
	c.once.Do(func() { close(c.stop) })
	_ = c.Client.Close()
}

// jumpClient is a shared connection to a jump host.
type jumpClient struct {
	mu sync.Mutex
	c  *client
}

func (j *jumpClient) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.c != nil {
		j.c.close()
	}
}

// routeKey identifies a hop by its whole route, so that two hosts behind
// the same bastion share its connection.
func routeKey(hops []Resolved) string {
	var parts []string
	for _, h := range hops {
		parts = append(parts, h.User+"@"+h.Addr())
	}
	return strings.Join(parts, ">")
}

// dialRoute connects to target through hops, reusing (or re-establishing)
// the shared jump host connections.
func (d *Dialer) dialRoute(ctx context.Context, target Resolved, logName string) (*client, error) {
	var via *client
	for i, hop := range target.Jumps {
		key := routeKey(target.Jumps[:i+1])
		d.mu.Lock()
		j, ok := d.jumps[key]
		if !ok {
			j = &jumpClient{}
			d.jumps[key] = j
		}
		d.mu.Unlock()
		j.mu.Lock()
		if j.c == nil || !j.c.alive() {
			c, err := d.handshake(ctx, hop, via, target.Name+" (jump host "+hop.Name+")")
			if err != nil {
				j.mu.Unlock()
				return nil, err
			}
			j.c = c
		}
		via = j.c
		j.mu.Unlock()
	}
	return d.handshake(ctx, target, via, logName)
}

// handshake opens one SSH connection to r, directly or through via.
func (d *Dialer) handshake(ctx context.Context, r Resolved, via *client, name string) (*client, error) {
	start := time.Now()
	route := r.User + "@" + r.Addr()
	if via != nil {
		route += " via jump host"
	}
	nc, err := d.connect(ctx, r, via, name, route)
	if err != nil {
		return nil, err
	}
	hk := d.hostKeys(r, name)
	auth := loadAuth(d.opts.AgentSocket, r.IdentityFiles)
	defer auth.close()
	if len(auth.signers) == 0 {
		nc.Close()
		return nil, fmt.Errorf("%s: ssh %s: %w: %s", name, route, transport.ErrAuthFailed, auth.hint())
	}
	sc, chans, reqs, err := d.clientConn(ctx, nc, r, hk, auth, name, route)
	if err != nil {
		return nil, err
	}
	c := &client{Client: xssh.NewClient(sc, chans, reqs), dead: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		_ = c.Wait()
		close(c.dead)
	}()
	go keepalive(c, r.ServerAliveInterval, r.ServerAliveCountMax, d.log.With("host", name))
	d.log.Debug("ssh handshake", "host", name, "route", route, "host_key", keyDesc(hk.presented), "duration", time.Since(start))
	return c, nil
}

// connect opens the TCP connection to r (or a direct-tcpip channel through
// the previous hop via), bounded by r.ConnectTimeout.
func (d *Dialer) connect(ctx context.Context, r Resolved, via *client, name, route string) (net.Conn, error) {
	addr := r.Addr()
	dctx, cancel := context.WithTimeout(ctx, r.ConnectTimeout)
	var nc net.Conn
	var err error
	switch {
	case via != nil:
		nc, err = via.DialContext(dctx, "tcp", addr)
	case d.opts.NetDial != nil:
		nc, err = d.opts.NetDial(dctx, "tcp", addr)
	default:
		var nd net.Dialer
		nc, err = nd.DialContext(dctx, "tcp", addr)
	}
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxErr(fmt.Sprintf("%s: connect %s", name, route), ctx.Err())
		}
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return nil, fmt.Errorf("%s: connect %s: %w: %w (ConnectTimeout %s): %v", name, route, transport.ErrUnreachable, transport.ErrTimeout, r.ConnectTimeout, err)
		}
		return nil, fmt.Errorf("%s: connect %s: %w: %v", name, route, transport.ErrUnreachable, err)
	}
	return nc, nil
}

// hostKeys is how r's host key is checked (and a new one recorded).
func (d *Dialer) hostKeys(r Resolved, name string) *hostKeys {
	addr := r.Addr()
	return &hostKeys{
		host:     name,
		files:    r.KnownHostsFiles,
		global:   r.GlobalKnownHosts,
		trustNew: r.TrustNew,
		hash:     r.HashKnownHosts,
		onAdd: func(line string) {
			d.log.Info("recorded new host key", "host", name, "addr", addr, "file", r.KnownHostsFiles[0])
		},
	}
}

// clientConn runs the SSH handshake over nc, bounded by HandshakeTimeout
// and ctx: x/crypto has no deadline of its own, so a watchdog closes the
// connection. On failure nc is closed.
func (d *Dialer) clientConn(ctx context.Context, nc net.Conn, r Resolved, hk *hostKeys, auth *authSet, name, route string) (xssh.Conn, <-chan xssh.NewChannel, <-chan *xssh.Request, error) {
	addr := r.Addr()
	var hostKeyErr error
	cfg := &xssh.ClientConfig{
		User:              r.User,
		Auth:              []xssh.AuthMethod{xssh.PublicKeys(auth.signers...)},
		HostKeyCallback:   hk.callback(&hostKeyErr),
		HostKeyAlgorithms: hk.algorithms(addr),
	}
	timedOut := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		t := time.NewTimer(d.opts.HandshakeTimeout)
		defer t.Stop()
		select {
		case <-finished:
			return
		case <-t.C:
		case <-ctx.Done():
		}
		close(timedOut)
		nc.Close()
	}()
	sc, chans, reqs, err := xssh.NewClientConn(nc, addr, cfg)
	close(finished)
	if err != nil {
		nc.Close()
		return nil, nil, nil, d.handshakeError(ctx, err, hostKeyErr, isClosed(timedOut), auth, name, route)
	}
	return sc, chans, reqs, nil
}

// handshakeError says why the handshake failed with err: the host key
// (hostKeyErr), ctx, the watchdog's timeout, authentication, or the
// host's unreachability.
func (d *Dialer) handshakeError(ctx context.Context, err, hostKeyErr error, timedOut bool, auth *authSet, name, route string) error {
	var hke *HostKeyError
	switch {
	case errors.As(hostKeyErr, &hke):
		return hke
	case hostKeyErr != nil:
		return hostKeyErr
	case ctx.Err() != nil:
		return ctxErr(fmt.Sprintf("%s: ssh handshake with %s", name, route), ctx.Err())
	case timedOut:
		return fmt.Errorf("%s: ssh handshake with %s: %w after %s: %v", name, route, transport.ErrTimeout, d.opts.HandshakeTimeout, err)
	case isAuthError(err):
		return fmt.Errorf("%s: ssh %s: %w: %v; %s", name, route, transport.ErrAuthFailed, err, auth.hint())
	default:
		return fmt.Errorf("%s: ssh handshake with %s: %w: %v", name, route, transport.ErrUnreachable, err)
	}
}

// keepalive sends keepalive@openssh.com every interval and closes the
// connection after countMax intervals without any reply.
func keepalive(c *client, interval time.Duration, countMax int, log hclog.Logger) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	replies := make(chan struct{}, 1)
	missed := 0
	inflight := false
	for {
		select {
		case <-c.stop:
			return
		case <-c.dead:
			return
		case <-replies:
			inflight = false
			missed = 0
		case <-t.C:
			if inflight {
				missed++
				if missed >= countMax {
					log.Warn("no keepalive reply, closing connection", "missed", missed, "interval", interval)
					_ = c.Client.Close()
					return
				}
				continue
			}
			inflight = true
			go func() {
				// Any reply, even a refusal, proves the server is alive.
				_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
				if err == nil {
					select {
					case replies <- struct{}{}:
					default:
					}
				}
			}()
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ctxErr wraps a context error, adding transport.ErrTimeout to a deadline.
func ctxErr(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %w", what, transport.ErrTimeout, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
