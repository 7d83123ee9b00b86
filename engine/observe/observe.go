package observe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

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
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("observe: invalid spec: %w", err)
	}
	hosts := make([]string, 0, len(spec.Hosts))
	ro := make(map[string]transport.Conn, len(spec.Hosts))
	for h := range spec.Hosts {
		if conns[h] == nil {
			return nil, fmt.Errorf("observe: no connection for host %s", h)
		}
		hosts = append(hosts, h)
		// Belt and braces: observe's commands are read-only by
		// construction, and the transport refuses anything else.
		ro[h] = transport.ReadOnly(conns[h])
	}
	slices.Sort(hosts)
	if parallelism <= 0 {
		parallelism = DefaultParallelism
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}

	facts := &Facts{
		Hosts:      make(map[string]*HostFacts, len(hosts)),
		Errors:     map[string]error{},
		RoundTrips: make(map[string]int, len(hosts)),
	}
	var mu sync.Mutex
	fail := func(host string, err error) {
		mu.Lock()
		defer mu.Unlock()
		facts.Errors[host] = err
		hf := facts.Hosts[host]
		if hf == nil {
			hf = &HostFacts{Host: host}
			facts.Hosts[host] = hf
		}
		hf.Err = err.Error()
	}

	// Round 1.
	_ = transport.ForEach(ctx, hosts, parallelism, func(ctx context.Context, host string) error {
		cmd := transport.Cmd{Script: ProbeScript(spec.Hosts[host]), Timeout: timeout}
		out, err := run(ctx, ro[host], cmd)
		mu.Lock()
		facts.RoundTrips[host]++
		mu.Unlock()
		if err != nil {
			fail(host, err)
			return nil
		}
		hf, err := Parse(out)
		if err != nil {
			fail(host, fmt.Errorf("%s: observe probe: %w", host, err))
			return nil
		}
		hf.Host = host
		label(hf.RouteChecks, hf.TCPChecks, spec.Hosts[host].Peers)
		mu.Lock()
		facts.Hosts[host] = hf
		mu.Unlock()
		return nil
	})
	if err := ctx.Err(); err != nil {
		for _, h := range hosts {
			if facts.Hosts[h] == nil {
				fail(h, fmt.Errorf("%s: not observed: %w", h, err))
			}
		}
		return facts, err
	}

	// Round 2: peers whose fabric address only their own facts tell.
	targets := map[string][]netip.AddrPort{}
	var round2 []string
	for _, h := range hosts {
		hf := facts.Hosts[h]
		if hf.Err != "" {
			continue
		}
		for _, p := range spec.Hosts[h].Peers {
			if p.Addr.IsValid() && !p.Assumed {
				continue
			}
			addr, err := peerAddr(spec, facts, p.Host)
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
			if len(targets[h]) == 0 {
				round2 = append(round2, h)
			}
			targets[h] = append(targets[h], netip.AddrPortFrom(addr, uint16(p.Port)))
		}
	}
	_ = transport.ForEach(ctx, round2, parallelism, func(ctx context.Context, host string) error {
		hs := spec.Hosts[host]
		cmd := transport.Cmd{Script: PeerScript(hs, targets[host]), Timeout: timeout}
		out, err := run(ctx, ro[host], cmd)
		mu.Lock()
		defer mu.Unlock()
		facts.RoundTrips[host]++
		hf := facts.Hosts[host]
		var pf *HostFacts
		if err == nil {
			pf, err = Parse(out)
		}
		if err != nil {
			// The host answered round 1: keep its facts, fail only the checks.
			for _, t := range targets[host] {
				hf.RouteChecks = append(hf.RouteChecks, RouteCheck{Addr: t.Addr(), Err: err.Error()})
				if t.Port() > 0 {
					hf.TCPChecks = append(hf.TCPChecks, TCPCheck{Addr: t.Addr(), Port: int(t.Port()), Err: err.Error()})
				}
			}
		} else {
			hf.RouteChecks = append(hf.RouteChecks, pf.RouteChecks...)
			hf.TCPChecks = append(hf.TCPChecks, pf.TCPChecks...)
		}
		peers := make([]Peer, 0, len(hs.Peers))
		for _, p := range hs.Peers {
			if !p.Addr.IsValid() || p.Assumed {
				if a, err := peerAddr(spec, facts, p.Host); err == nil {
					p.Addr = a
				}
			}
			peers = append(peers, p)
		}
		label(hf.RouteChecks, hf.TCPChecks, peers)
		return nil
	})
	return facts, ctx.Err()
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
