package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
)

// Defaults for what neither the explicit options nor ~/.ssh/config set.
const (
	DefaultPort                = 22
	DefaultConnectTimeout      = 10 * time.Second
	DefaultHandshakeTimeout    = 30 * time.Second
	DefaultServerAliveInterval = 15 * time.Second
	DefaultServerAliveCountMax = 3
	// DefaultMaxSessions caps concurrent commands on one connection, below
	// OpenSSH's MaxSessions=10 so that the sessions that kill a cancelled
	// command always find room.
	DefaultMaxSessions = 8
	// DefaultKillGrace is how long a cancelled command has between SIGTERM
	// and SIGKILL.
	DefaultKillGrace = 3 * time.Second
	// maxJumpDepth bounds ProxyJump chains (and catches loops).
	maxJumpDepth = 8
)

// HostConfig says how to reach one host. It is what the engine fills from a
// node's HCL block (address, user, port, identity file, bastion). Zero
// fields are unset: they are taken from ~/.ssh/config for the host's name,
// then from the defaults, exactly as ssh(1) would.
type HostConfig struct {
	// HostName is the address to dial (ssh_config HostName); default the
	// node name itself.
	HostName string
	// Port to dial; default 22.
	Port int
	// User to log in as; default the local user.
	User string
	// IdentityFiles are private key files to offer, in order, before the
	// keys held by ssh-agent. Default ~/.ssh/id_ed25519, id_ecdsa, id_rsa
	// (those that exist).
	IdentityFiles []string
	// ProxyJump is a comma-separated chain of jump hosts in OpenSSH syntax,
	// [user@]host[:port], dialled in order (a node's HCL `bastion`). Each
	// host is itself looked up in Options.Hosts and ~/.ssh/config. "none"
	// disables a ProxyJump set in ~/.ssh/config.
	ProxyJump string
	// ConnectTimeout bounds the TCP connect; default 10s.
	ConnectTimeout time.Duration
	// ServerAliveInterval is the keepalive period; default 15s. A
	// connection that misses ServerAliveCountMax (default 3) replies in a
	// row is closed.
	ServerAliveInterval time.Duration
	ServerAliveCountMax int
	// KnownHostsFiles replace the UserKnownHostsFile list (default
	// ~/.ssh/known_hosts). The first file is where accepted new keys go.
	KnownHostsFiles []string
	// StrictHostKeyChecking is "yes" (default; "ask" means the same since
	// rayform never prompts), or "accept-new" to record unknown host keys.
	// "no" is treated as "accept-new": a changed key is never accepted.
	StrictHostKeyChecking string
}

// Resolved is a host's complete connection settings after merging explicit
// options, ~/.ssh/config and defaults.
type Resolved struct {
	// Name is the name the host was asked for (node name or ssh alias).
	Name                string
	HostName            string
	Port                int
	User                string
	IdentityFiles       []string
	ConnectTimeout      time.Duration
	ServerAliveInterval time.Duration
	ServerAliveCountMax int
	KnownHostsFiles     []string
	GlobalKnownHosts    []string
	// TrustNew is true when unknown host keys are recorded instead of
	// refused (StrictHostKeyChecking=accept-new or Options.TrustNewHosts).
	TrustNew bool
	// HashKnownHosts is true when recorded keys get hashed host names.
	HashKnownHosts bool
	// Jumps are the jump hosts in dialling order (the first is dialled
	// directly, each next one through the previous).
	Jumps []Resolved
}

// Addr is the host:port dialled.
func (r Resolved) Addr() string {
	return net.JoinHostPort(r.HostName, strconv.Itoa(r.Port))
}

// String renders the route, e.g. "root@10.0.0.5:22 via ubuntu@bastion:22".
func (r Resolved) String() string {
	s := r.User + "@" + r.Addr()
	for i := len(r.Jumps) - 1; i >= 0; i-- {
		s += " via " + r.Jumps[i].User + "@" + r.Jumps[i].Addr()
	}
	return s
}

// sshConfig is the parsed user and system ssh_config files.
type sshConfig struct {
	files []*ssh_config.Config
}

func loadSSHConfig(paths ...string) (*sshConfig, error) {
	c := &sshConfig{}
	for _, p := range paths {
		if p == "" || p == "none" {
			continue
		}
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ssh config: %w", err)
		}
		cfg, err := ssh_config.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("ssh config %s: %w", p, err)
		}
		c.files = append(c.files, cfg)
	}
	return c, nil
}

// get returns the first value for key for alias, user file before system
// file (ssh_config semantics: the first obtained value wins).
func (c *sshConfig) get(alias, key string) (string, error) {
	for _, f := range c.files {
		v, err := f.Get(alias, key)
		if err != nil {
			return "", fmt.Errorf("ssh config for %s: %s: %w", alias, key, err)
		}
		if v != "" {
			return v, nil
		}
	}
	return "", nil
}

func (c *sshConfig) getAll(alias, key string) ([]string, error) {
	var all []string
	for _, f := range c.files {
		v, err := f.GetAll(alias, key)
		if err != nil {
			return nil, fmt.Errorf("ssh config for %s: %s: %w", alias, key, err)
		}
		all = append(all, v...)
	}
	return all, nil
}

// resolver merges explicit options, ssh config and defaults.
type resolver struct {
	opts      *Options
	cfg       *sshConfig
	home      string
	localUser string
}

func newResolver(opts *Options) (*resolver, error) {
	home := opts.Home
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("ssh: home directory: %w", err)
		}
		home = h
	}
	userFile := opts.ConfigFile
	if userFile == "" {
		userFile = filepath.Join(home, ".ssh", "config")
	}
	sysFile := opts.SystemConfigFile
	if sysFile == "" {
		sysFile = "/etc/ssh/ssh_config"
	}
	cfg, err := loadSSHConfig(userFile, sysFile)
	if err != nil {
		return nil, err
	}
	localUser := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		localUser = u.Username
	}
	return &resolver{opts: opts, cfg: cfg, home: home, localUser: localUser}, nil
}

// resolve computes the settings for name (a node name or ssh alias).
func (r *resolver) resolve(name string) (Resolved, error) {
	return r.resolveDepth(name, HostConfig{}, 0)
}

// resolveDepth resolves name; override holds values from a jump spec
// (user@host:port) that beat everything else.
func (r *resolver) resolveDepth(name string, override HostConfig, depth int) (Resolved, error) {
	if depth > maxJumpDepth {
		return Resolved{}, fmt.Errorf("%s: ProxyJump chain deeper than %d (a loop?)", name, maxJumpDepth)
	}
	explicit := r.opts.Hosts[name]
	res := Resolved{Name: name}
	if err := r.resolveEndpoint(&res, override, explicit); err != nil {
		return Resolved{}, err
	}
	tokens := map[byte]string{'h': res.HostName, 'r': res.User, 'u': r.localUser, 'd': r.home, 'n': name, 'p': strconv.Itoa(res.Port)}
	for _, step := range []func(*Resolved, HostConfig, map[byte]string) error{
		r.resolveIdentities,
		r.resolveLiveness,
		r.resolveKnownHosts,
		r.resolveHostKeyPolicy,
	} {
		if err := step(&res, explicit, tokens); err != nil {
			return Resolved{}, err
		}
	}
	if err := r.resolveJumps(&res, explicit, depth); err != nil {
		return Resolved{}, err
	}
	return res, nil
}

// resolveEndpoint sets where and as whom to log in: HostName, Port and
// User, each from the override, else the explicit options, else ssh config,
// else the default (the name, port 22, the local user).
func (r *resolver) resolveEndpoint(res *Resolved, override, explicit HostConfig) error {
	name := res.Name
	var err error
	res.HostName = first(override.HostName, explicit.HostName)
	if res.HostName == "" {
		v, err := r.cfg.get(name, "HostName")
		if err != nil {
			return err
		}
		res.HostName = expandTokens(v, map[byte]string{'h': name})
	}
	if res.HostName == "" {
		res.HostName = name
	}
	res.Port = firstInt(override.Port, explicit.Port)
	if res.Port == 0 {
		if res.Port, err = r.intOption(name, "Port"); err != nil {
			return err
		}
	}
	if res.Port == 0 {
		res.Port = DefaultPort
	}
	res.User = first(override.User, explicit.User)
	if res.User == "" {
		if res.User, err = r.cfg.get(name, "User"); err != nil {
			return err
		}
	}
	if res.User == "" {
		res.User = r.localUser
	}
	return nil
}

// resolveIdentities sets the identity files: the explicit list, else every
// IdentityFile in ssh config, else the default files that exist.
func (r *resolver) resolveIdentities(res *Resolved, explicit HostConfig, tokens map[byte]string) error {
	files := explicit.IdentityFiles
	if len(files) == 0 {
		var err error
		if files, err = r.cfg.getAll(res.Name, "IdentityFile"); err != nil {
			return err
		}
	}
	for _, f := range files {
		res.IdentityFiles = append(res.IdentityFiles, r.expandPath(f, tokens))
	}
	if len(res.IdentityFiles) == 0 {
		for _, f := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			p := filepath.Join(r.home, ".ssh", f)
			if _, err := os.Stat(p); err == nil {
				res.IdentityFiles = append(res.IdentityFiles, p)
			}
		}
	}
	return nil
}

// resolveLiveness sets the connect timeout and the keepalives.
func (r *resolver) resolveLiveness(res *Resolved, explicit HostConfig, _ map[byte]string) error {
	name := res.Name
	var err error
	if res.ConnectTimeout, err = r.durationOption(name, "ConnectTimeout", explicit.ConnectTimeout, DefaultConnectTimeout); err != nil {
		return err
	}
	if res.ServerAliveInterval, err = r.durationOption(name, "ServerAliveInterval", explicit.ServerAliveInterval, DefaultServerAliveInterval); err != nil {
		return err
	}
	res.ServerAliveCountMax = explicit.ServerAliveCountMax
	if res.ServerAliveCountMax == 0 {
		if res.ServerAliveCountMax, err = r.intOption(name, "ServerAliveCountMax"); err != nil {
			return err
		}
	}
	if res.ServerAliveCountMax <= 0 {
		res.ServerAliveCountMax = DefaultServerAliveCountMax
	}
	return nil
}

// resolveKnownHosts sets the user's known_hosts files (explicit, else the
// options', else UserKnownHostsFile, else ~/.ssh/known_hosts) and the
// global ones.
func (r *resolver) resolveKnownHosts(res *Resolved, explicit HostConfig, tokens map[byte]string) error {
	khFiles := explicit.KnownHostsFiles
	if len(khFiles) == 0 {
		khFiles = r.opts.KnownHostsFiles
	}
	if len(khFiles) == 0 {
		v, err := r.cfg.get(res.Name, "UserKnownHostsFile")
		if err != nil {
			return err
		}
		khFiles = strings.Fields(v)
	}
	if len(khFiles) == 0 {
		khFiles = []string{filepath.Join(r.home, ".ssh", "known_hosts")}
	}
	for _, f := range khFiles {
		res.KnownHostsFiles = append(res.KnownHostsFiles, r.expandPath(f, tokens))
	}
	global, err := r.cfg.get(res.Name, "GlobalKnownHostsFile")
	if err != nil {
		return err
	}
	if global == "" {
		global = "/etc/ssh/ssh_known_hosts"
	}
	for _, f := range strings.Fields(global) {
		res.GlobalKnownHosts = append(res.GlobalKnownHosts, r.expandPath(f, tokens))
	}
	return nil
}

// resolveHostKeyPolicy sets whether an unknown host key is trusted
// (StrictHostKeyChecking, or the options' TrustNewHosts) and whether new
// known_hosts lines are hashed.
func (r *resolver) resolveHostKeyPolicy(res *Resolved, explicit HostConfig, _ map[byte]string) error {
	strict := explicit.StrictHostKeyChecking
	if strict == "" {
		var err error
		if strict, err = r.cfg.get(res.Name, "StrictHostKeyChecking"); err != nil {
			return err
		}
	}
	switch strings.ToLower(strict) {
	case "", "yes", "ask", "true":
	case "accept-new", "no", "off", "false":
		res.TrustNew = true
	default:
		return fmt.Errorf("%s: StrictHostKeyChecking %q: want yes, accept-new or no", res.Name, strict)
	}
	if r.opts.TrustNewHosts {
		res.TrustNew = true
	}
	hash, err := r.cfg.get(res.Name, "HashKnownHosts")
	if err != nil {
		return err
	}
	res.HashKnownHosts = strings.EqualFold(hash, "yes")
	return nil
}

// resolveJumps resolves the jump hosts (ProxyJump: explicit, else ssh
// config; "none" disables) into res.Jumps, the first hop's own jumps
// before it.
func (r *resolver) resolveJumps(res *Resolved, explicit HostConfig, depth int) error {
	name := res.Name
	jump := explicit.ProxyJump
	if jump == "" {
		var err error
		if jump, err = r.cfg.get(name, "ProxyJump"); err != nil {
			return err
		}
	}
	if jump == "" || strings.EqualFold(jump, "none") {
		return nil
	}
	for i, spec := range strings.Split(jump, ",") {
		hopName, hopOverride, err := parseJumpSpec(strings.TrimSpace(spec))
		if err != nil {
			return fmt.Errorf("%s: ProxyJump %q: %w", name, jump, err)
		}
		hop, err := r.resolveDepth(hopName, hopOverride, depth+1)
		if err != nil {
			return fmt.Errorf("%s: jump host: %w", name, err)
		}
		// Only the first hop keeps its own ProxyJump (as ssh -J does): the
		// later hops are reached through the earlier ones.
		if i > 0 {
			hop.Jumps = nil
		}
		res.Jumps = append(res.Jumps, hop.Jumps...)
		hop.Jumps = nil
		res.Jumps = append(res.Jumps, hop)
	}
	return nil
}

// parseJumpSpec splits "[user@]host[:port]" (or ssh://user@host:port).
func parseJumpSpec(spec string) (string, HostConfig, error) {
	var o HostConfig
	spec = strings.TrimPrefix(spec, "ssh://")
	if spec == "" {
		return "", o, errors.New("empty jump host")
	}
	if i := strings.LastIndex(spec, "@"); i >= 0 {
		o.User, spec = spec[:i], spec[i+1:]
	}
	host := spec
	if h, p, err := net.SplitHostPort(spec); err == nil {
		port, err := strconv.Atoi(p)
		if err != nil || port <= 0 || port > 65535 {
			return "", o, fmt.Errorf("bad port %q", p)
		}
		host, o.Port = h, port
	}
	if host == "" {
		return "", o, fmt.Errorf("no host in %q", spec)
	}
	return host, o, nil
}

func (r *resolver) intOption(name, key string) (int, error) {
	v, err := r.cfg.get(name, key)
	if err != nil || v == "" {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("ssh config for %s: %s %q is not a number", name, key, v)
	}
	return n, nil
}

// durationOption returns explicit if set, else the ssh config value in
// seconds, else def.
func (r *resolver) durationOption(name, key string, explicit, def time.Duration) (time.Duration, error) {
	if explicit > 0 {
		return explicit, nil
	}
	n, err := r.intOption(name, key)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	return def, nil
}

// expandPath expands a leading ~ and the %-tokens of ssh_config(5).
func (r *resolver) expandPath(p string, tokens map[byte]string) string {
	if p == "~" {
		p = r.home
	} else if strings.HasPrefix(p, "~/") {
		p = filepath.Join(r.home, p[2:])
	}
	return expandTokens(p, tokens)
}

// expandTokens replaces %x with tokens[x] and %% with %; unknown tokens stay.
func expandTokens(s string, tokens map[byte]string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if s[i] == '%' {
			b.WriteByte('%')
		} else if v, ok := tokens[s[i]]; ok {
			b.WriteString(v)
		} else {
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstInt(vals ...int) int {
	for _, v := range vals {
		if v != 0 {
			return v
		}
	}
	return 0
}
