package observe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/transport"
)

// DefaultParallelism is the number of hosts probed at once when Observe is
// given parallelism <= 0 (Terraform's -parallelism default).
const DefaultParallelism = 10

// Observe probes every host of spec over conns and returns what it found.
//
// Round 1 runs ProbeScript on every host, at most parallelism at a time: one
// exec per host gathers all of its facts, including the route to (and a TCP
// connect to) every peer whose fabric address the spec declares. Round 2
// runs only on hosts with a peer whose fabric address must be learned from
// that peer's round-1 facts (it is not declared, or it was assumed and the
// peer's facts show another): one PeerScript exec checks all such peers. So
// every host costs at most two round trips, and one when every peer address
// is declared or rightly assumed.
//
// Every command is marked non-mutating and is read-only on the host. A host
// that cannot be reached or whose probe fails gets an Err (and an entry in
// Facts.Errors); the other hosts are observed regardless. Observe returns an
// error only for an invalid spec or a missing connection, or when ctx ends
// (with the facts gathered so far).
func Observe(ctx context.Context, conns map[string]transport.Conn, spec Spec, parallelism int) (*Facts, error) {
	o, err := newObservation(conns, spec, parallelism)
	if err != nil {
		return nil, err
	}
	o.probeHosts(ctx)
	if err := ctx.Err(); err != nil {
		o.failUnobserved(err)
		return o.facts, err
	}
	targets := o.peersToLearn()
	o.checkLearnedPeers(ctx, targets)
	return o.facts, ctx.Err()
}

// observation is one Observe call: the hosts to probe over read-only
// connections, and the facts gathered so far (mu guards them while the
// hosts are probed in parallel).
type observation struct {
	spec        Spec
	hosts       []string // sorted
	ro          map[string]transport.Conn
	parallelism int
	timeout     time.Duration

	mu    sync.Mutex
	facts *Facts
}

// newObservation checks spec and conns and applies the defaults of
// parallelism and the probe timeout.
func newObservation(conns map[string]transport.Conn, spec Spec, parallelism int) (*observation, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("observe: invalid spec: %w", err)
	}
	o := &observation{spec: spec, ro: make(map[string]transport.Conn, len(spec.Hosts)), parallelism: parallelism, timeout: spec.Timeout}
	for h := range spec.Hosts {
		if conns[h] == nil {
			return nil, fmt.Errorf("observe: no connection for host %s", h)
		}
		o.hosts = append(o.hosts, h)
		// Belt and braces: observe's commands are read-only by
		// construction, and the transport refuses anything else.
		o.ro[h] = transport.ReadOnly(conns[h])
	}
	slices.Sort(o.hosts)
	if o.parallelism <= 0 {
		o.parallelism = DefaultParallelism
	}
	if o.timeout <= 0 {
		o.timeout = DefaultProbeTimeout
	}
	o.facts = &Facts{
		Hosts:      make(map[string]*HostFacts, len(o.hosts)),
		Errors:     map[string]error{},
		RoundTrips: make(map[string]int, len(o.hosts)),
	}
	return o, nil
}

// fail records that host could not be observed.
func (o *observation) fail(host string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.facts.Errors[host] = err
	hf := o.facts.Hosts[host]
	if hf == nil {
		hf = &HostFacts{Host: host}
		o.facts.Hosts[host] = hf
	}
	hf.Err = err.Error()
}

// probeHosts is round 1: ProbeScript on every host, parsed into its facts.
func (o *observation) probeHosts(ctx context.Context) {
	_ = transport.ForEach(ctx, o.hosts, o.parallelism, func(ctx context.Context, host string) error {
		cmd := transport.Cmd{Script: ProbeScript(o.spec.Hosts[host]), Timeout: o.timeout}
		out, err := run(ctx, o.ro[host], cmd)
		o.mu.Lock()
		o.facts.RoundTrips[host]++
		o.mu.Unlock()
		if err != nil {
			o.fail(host, err)
			return nil
		}
		hf, err := Parse(out)
		if err != nil {
			o.fail(host, fmt.Errorf("%s: observe probe: %w", host, err))
			return nil
		}
		hf.Host = host
		label(hf.RouteChecks, hf.TCPChecks, o.spec.Hosts[host].Peers)
		o.mu.Lock()
		o.facts.Hosts[host] = hf
		o.mu.Unlock()
		return nil
	})
}

// failUnobserved fails every host round 1 did not reach before ctx ended.
func (o *observation) failUnobserved(err error) {
	for _, h := range o.hosts {
		if o.facts.Hosts[h] == nil {
			o.fail(h, fmt.Errorf("%s: not observed: %w", h, err))
		}
	}
}

// peersToLearn returns, per host that needs round 2, the peers' addresses
// (and ports) that only the peers' own round-1 facts tell: peers not
// declared, and assumed ones whose guess was wrong (their round-1 checks
// are dropped). A peer whose address cannot be learned gets failed checks
// at once.
func (o *observation) peersToLearn() map[string][]netip.AddrPort {
	targets := map[string][]netip.AddrPort{}
	for _, h := range o.hosts {
		hf := o.facts.Hosts[h]
		if hf.Err != "" {
			continue
		}
		for _, p := range o.spec.Hosts[h].Peers {
			if p.Addr.IsValid() && !p.Assumed {
				continue
			}
			addr, err := peerAddr(o.spec, o.facts, p.Host)
			if p.Assumed {
				if err == nil && addr == p.Addr {
					continue // the guess checked in round 1 was right
				}
				hf.RouteChecks, hf.TCPChecks = dropPeer(hf.RouteChecks, hf.TCPChecks, p)
			}
			if err != nil {
				hf.RouteChecks = append(hf.RouteChecks, RouteCheck{Peer: p.Host, Err: err.Error()})
				if p.Port > 0 {
					hf.TCPChecks = append(hf.TCPChecks, TCPCheck{Peer: p.Host, Port: p.Port, Err: err.Error()})
				}
				continue
			}
			targets[h] = append(targets[h], netip.AddrPortFrom(addr, uint16(p.Port)))
		}
	}
	return targets
}

// checkLearnedPeers is round 2: one PeerScript per host with targets,
// whose route and TCP checks join the host's round-1 facts, labelled with
// the peers' learned addresses.
func (o *observation) checkLearnedPeers(ctx context.Context, targets map[string][]netip.AddrPort) {
	var round2 []string
	for _, h := range o.hosts {
		if len(targets[h]) > 0 {
			round2 = append(round2, h)
		}
	}
	_ = transport.ForEach(ctx, round2, o.parallelism, func(ctx context.Context, host string) error {
		hs := o.spec.Hosts[host]
		cmd := transport.Cmd{Script: PeerScript(hs, targets[host]), Timeout: o.timeout}
		out, err := run(ctx, o.ro[host], cmd)
		o.mu.Lock()
		defer o.mu.Unlock()
		o.facts.RoundTrips[host]++
		hf := o.facts.Hosts[host]
		var pf *HostFacts
		if err == nil {
			pf, err = Parse(out)
		}
		if err != nil {
			// The host answered round 1: keep its facts, fail only the checks.
			failChecks(hf, targets[host], err)
		} else {
			hf.RouteChecks = append(hf.RouteChecks, pf.RouteChecks...)
			hf.TCPChecks = append(hf.TCPChecks, pf.TCPChecks...)
		}
		label(hf.RouteChecks, hf.TCPChecks, o.learnedPeers(hs))
		return nil
	})
}

// failChecks adds a failed route check (and TCP check, where a port is
// asked) to hf for every target.
func failChecks(hf *HostFacts, targets []netip.AddrPort, err error) {
	for _, t := range targets {
		hf.RouteChecks = append(hf.RouteChecks, RouteCheck{Addr: t.Addr(), Err: err.Error()})
		if t.Port() > 0 {
			hf.TCPChecks = append(hf.TCPChecks, TCPCheck{Addr: t.Addr(), Port: int(t.Port()), Err: err.Error()})
		}
	}
}

// learnedPeers is hs's peers with the addresses round 1 learned for those
// not declared or assumed.
func (o *observation) learnedPeers(hs HostSpec) []Peer {
	peers := make([]Peer, 0, len(hs.Peers))
	for _, p := range hs.Peers {
		if !p.Addr.IsValid() || p.Assumed {
			if a, err := peerAddr(o.spec, o.facts, p.Host); err == nil {
				p.Addr = a
			}
		}
		peers = append(peers, p)
	}
	return peers
}

// run runs cmd read-only and returns its stdout. A non-zero exit with probe
// output is still an answer: the probe reports failures in its sections.
func run(ctx context.Context, conn transport.Conn, cmd transport.Cmd) ([]byte, error) {
	res, err := conn.Run(ctx, cmd)
	if err != nil {
		var ee *transport.ExitError
		if errors.As(err, &ee) && len(res.Stdout) > 0 {
			return res.Stdout, nil
		}
		if strings.HasPrefix(err.Error(), conn.Host()+":") {
			return nil, fmt.Errorf("observe probe: %w", err)
		}
		return nil, fmt.Errorf("%s: observe probe: %w", conn.Host(), err)
	}
	return res.Stdout, nil
}

// peerAddr is the fabric address of host according to its own facts.
func peerAddr(spec Spec, facts *Facts, host string) (netip.Addr, error) {
	pf := facts.Hosts[host]
	if pf == nil || pf.Err != "" {
		return netip.Addr{}, fmt.Errorf("fabric address of %s unknown: %s was not observed", host, host)
	}
	fab := spec.Hosts[host].Fabric
	if a, _, ok := fab.Find(pf); ok {
		return a, nil
	}
	where := "its fabric"
	switch {
	case fab.Interface != "" && fab.CIDR.IsValid():
		where = fmt.Sprintf("%s in %s", fab.Interface, fab.CIDR)
	case fab.Interface != "":
		where = fab.Interface
	case fab.CIDR.IsValid():
		where = fab.CIDR.String()
	}
	return netip.Addr{}, fmt.Errorf("fabric address of %s unknown: no address on %s", host, where)
}

// dropPeer removes the checks round 1 made of peer p's assumed address.
func dropPeer(routes []RouteCheck, tcps []TCPCheck, p Peer) ([]RouteCheck, []TCPCheck) {
	routes = slices.DeleteFunc(routes, func(c RouteCheck) bool { return c.Peer == p.Host && c.Addr == p.Addr })
	tcps = slices.DeleteFunc(tcps, func(c TCPCheck) bool { return c.Peer == p.Host && c.Addr == p.Addr })
	return routes, tcps
}

// label names the peer of every check by its address.
func label(routes []RouteCheck, tcps []TCPCheck, peers []Peer) {
	byAddr := map[netip.Addr]string{}
	for _, p := range peers {
		if p.Addr.IsValid() {
			byAddr[p.Addr] = p.Host
		}
	}
	for i := range routes {
		if routes[i].Peer == "" {
			routes[i].Peer = byAddr[routes[i].Addr]
		}
	}
	for i := range tcps {
		if tcps[i].Peer == "" {
			tcps[i].Peer = byAddr[tcps[i].Addr]
		}
	}
}
