package observe

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/imageref"
)

// Spec says what to observe on every host. It is built by the caller from
// the configuration; observe does not know the configuration language.
type Spec struct {
	// Hosts maps node name to what to look at there.
	Hosts map[string]HostSpec
	// Timeout bounds one probe command on one host; zero means
	// DefaultProbeTimeout.
	Timeout time.Duration
}

// DefaultProbeTimeout bounds one probe command when Spec.Timeout is zero.
const DefaultProbeTimeout = 60 * time.Second

// DefaultCommandTimeout bounds one tool inside a probe (nvidia-smi, docker,
// ray) when HostSpec.CommandTimeout is zero and the host has `timeout`.
const DefaultCommandTimeout = 15 * time.Second

// HostSpec says what to observe on one host. The zero value observes the
// host alone: network, memory, GPUs and docker.
type HostSpec struct {
	// Project is the value of the rayform.project label of rayform's
	// containers; empty means do not list containers by label.
	Project string
	// Images are the image references the host's containers need.
	Images []string
	// Containers are the names the host's containers should have; they are
	// listed even when they lack rayform's labels (a name conflict).
	Containers []string
	// SpecHashes maps a container name to the rayform.spec-hash label a
	// container of that name carries when it is exactly as wanted. Such a
	// container, running, is known from `docker ps` alone: the probe skips
	// its `docker inspect`, and the image inspection too when every
	// container of the host is current. Every other container is inspected.
	SpecHashes map[string]string
	// EnvKeys is the allow-list of container environment variables whose
	// values are kept (the kinds name them); nil keeps none. Every other
	// value is redacted on the host and never reaches rayform.
	EnvKeys []string

	// HTTP are the loopback HTTP GETs to make on the host (an endpoint's
	// health, a list it serves); each answer is in HostFacts.HTTP under
	// the request's URL, so several requests of one kind (two servers on
	// two ports) each get their own.
	HTTP []HTTPProbe
	// Records are the process records to read (see RecordProbe); each is
	// in HostFacts.Records under its Name.
	Records []RecordProbe
	// Files are absolute paths (of letters, digits and "._/-") whose
	// modification time to read; each is in HostFacts.Files under its
	// path, and the host's clock in HostFacts.Clock.
	Files []string
	// Trees are absolute directories (of letters, digits and "._/-") whose
	// files to list with their sizes, with the free space of the
	// filesystem holding each; each is in HostFacts.Trees under its path.
	Trees []string
	// Reads are small files whose content to read (see ReadProbe); each
	// is in HostFacts.Reads under its Key.
	Reads []ReadProbe
	// SecretKeys are the lock names (path segments) whose secret-digest
	// key to read from the SSH user's ~/.rayform/locks (see
	// SecretKeyFile); each is in HostFacts.SecretKeys under its name.
	SecretKeys []string

	// Fabric says how this host's own fabric address is found, so peers
	// whose Peer.Addr is unknown can learn it (round 2).
	Fabric Fabric
	// Peers are the hosts this one must reach over the fabric.
	Peers []Peer

	// Ports are the TCP ports rayform's containers and serves will listen
	// on at this host (the Ray head's GCS and dashboard, the serves'): the
	// probe lists which of them something already listens on, and what
	// (ss -ltnp), so plan can name it before apply fails to bind.
	Ports []int
	// AllListeners lists every listening TCP socket of the host, not only
	// those on Ports (status's exposure report).
	AllListeners bool

	// CommandTimeout bounds each tool the probe runs; zero means
	// DefaultCommandTimeout.
	CommandTimeout time.Duration
}

// Fabric locates a host's address on the fabric network: Address when it is
// declared, else the first address on Interface inside CIDR (either may be
// unset).
type Fabric struct {
	Interface string
	CIDR      netip.Prefix
	Address   netip.Addr
}

// Peer is another host this one must reach.
type Peer struct {
	// Host is the peer's node name, a key of Spec.Hosts.
	Host string
	// Addr is the peer's fabric address. When it is not set Observe learns
	// it from the peer's own facts (its Fabric) and checks it in a second
	// round trip; when it is set the check is part of the first.
	Addr netip.Addr
	// Port, when non-zero, is also checked with a TCP connect (for example
	// the head's GCS port, 6379).
	Port int
	// Assumed marks Addr as a guess (the address the peer had when it was
	// last applied, from the state): round 1 checks it, and when the
	// peer's own facts show another address, round 2 checks that one
	// instead and the guess's checks are dropped.
	Assumed bool
}

// Validators for the words the probe script embeds. They are stricter than
// Docker's own rules only where a word could be mistaken for syntax.

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// wordOf reports whether s is non-empty, starts with a letter or digit and
// continues with letters, digits and bytes of extra.
func wordOf(s, extra string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isAlnum(s[i]) && strings.IndexByte(extra, s[i]) < 0 {
			return false
		}
	}
	return true
}

func validImageRef(s string) bool   { return wordOf(s, "._/:@+-") && imageref.Valid(s) }
func validContainer(s string) bool  { return len(s) <= 255 && wordOf(strings.TrimPrefix(s, "/"), "_.-") }
func validLabelValue(s string) bool { return len(s) <= 255 && wordOf(s, "_.-") }
func validIfName(s string) bool     { return len(s) <= 15 && wordOf(s, "_.:@-") }

func validEnvKey(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' {
			return false
		}
	}
	return true
}

// Validate reports every problem of the spec; Observe refuses an invalid
// spec, and ProbeScript leaves out the items Validate would reject.
func (s Spec) Validate() error {
	var errs []error
	hosts := make([]string, 0, len(s.Hosts))
	for h := range s.Hosts {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		hs := s.Hosts[h]
		if err := hs.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", h, err))
		}
		for _, p := range hs.Peers {
			if _, ok := s.Hosts[p.Host]; !ok && !p.Addr.IsValid() {
				errs = append(errs, fmt.Errorf("host %s: peer %q is not a host of the spec and has no address", h, p.Host))
			}
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem of one host's spec.
func (hs HostSpec) Validate() error {
	var errs []error
	if hs.Project != "" && !validLabelValue(hs.Project) {
		errs = append(errs, fmt.Errorf("project %q: want letters, digits, '_', '.', '-'", hs.Project))
	}
	for _, ref := range hs.Images {
		if !validImageRef(ref) {
			errs = append(errs, fmt.Errorf("image %q: not an image reference", ref))
		}
	}
	for _, n := range hs.Containers {
		if !validContainer(n) {
			errs = append(errs, fmt.Errorf("container %q: not a container name", n))
		}
	}
	for n, h := range hs.SpecHashes {
		if !validContainer(n) || !validLabelValue(h) {
			errs = append(errs, fmt.Errorf("spec hash %q of container %q: want a container name and letters, digits, '_', '.', '-'", h, n))
		}
	}
	for _, p := range hs.Ports {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("port %d: out of range", p))
		}
	}
	for _, p := range hs.HTTP {
		if err := p.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range hs.Records {
		if err := r.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range hs.Files {
		if !validDir(f) {
			errs = append(errs, fmt.Errorf("file %q: want an absolute path of letters, digits, '.', '_', '/', '-' without \"..\"", f))
		}
	}
	for _, d := range hs.Trees {
		if !validDir(d) {
			errs = append(errs, fmt.Errorf("tree %q: want an absolute path of letters, digits, '.', '_', '/', '-' without \"..\"", d))
		}
	}
	for _, r := range hs.Reads {
		if err := r.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range hs.SecretKeys {
		if !validSegment(n) {
			errs = append(errs, fmt.Errorf("secret key %q: not a lock name", n))
		}
	}
	for _, k := range hs.EnvKeys {
		if !validEnvKey(k) {
			errs = append(errs, fmt.Errorf("env key %q: not an environment variable name", k))
		}
	}
	if hs.Fabric.Interface != "" && !validIfName(hs.Fabric.Interface) {
		errs = append(errs, fmt.Errorf("fabric interface %q: not an interface name", hs.Fabric.Interface))
	}
	for _, p := range hs.Peers {
		if p.Port < 0 || p.Port > 65535 {
			errs = append(errs, fmt.Errorf("peer %s port %d: out of range", p.Host, p.Port))
		}
	}
	slices.SortFunc(errs, func(a, b error) int {
		switch {
		case a.Error() < b.Error():
			return -1
		case a.Error() > b.Error():
			return 1
		}
		return 0
	})
	return errors.Join(errs...)
}

// envKeys returns the allow-list in effect, valid names only, sorted.
func (hs HostSpec) envKeys() []string {
	src := hs.EnvKeys
	out := make([]string, 0, len(src))
	for _, k := range src {
		if validEnvKey(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Find returns the host's fabric address in facts and the interface
// holding it: Address when set; else the first address on Interface (any
// interface when none is pinned) inside CIDR, or without a CIDR the
// interface's IPv4 address. It is the one rule for choosing a node's
// fabric address, for observe's peer checks and for the plan.
func (f Fabric) Find(facts *HostFacts) (netip.Addr, string, bool) {
	if f.Address.IsValid() {
		return f.Address, f.Interface, true
	}
	if f.Interface == "" && !f.CIDR.IsValid() {
		return netip.Addr{}, "", false
	}
	for _, a := range facts.Addresses.List {
		if f.Interface != "" && a.Interface != f.Interface {
			continue
		}
		if f.CIDR.IsValid() && !f.CIDR.Contains(a.Prefix.Addr()) {
			continue
		}
		if !a.Prefix.Addr().Is4() && !f.CIDR.IsValid() {
			continue // without a CIDR, take the interface's IPv4 address
		}
		return a.Prefix.Addr(), a.Interface, true
	}
	return netip.Addr{}, "", false
}
