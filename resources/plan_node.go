package resources

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
)

// networks checks every node of every network: its fabric address exists
// inside the CIDR on the pinned interface, the link is up with the declared
// MTU, no two nodes share an address, and every node routes to every peer
// over the fabric interface.
func (p *planner) networks() {
	for _, nw := range sortedNetworks(p.cfg) {
		seen := map[netip.Addr]string{}
		for _, node := range nw.Nodes {
			hf := p.host(node)
			if hf == nil {
				continue
			}
			want := nw.InterfaceFor(node)
			if want != "" {
				link, ok := hf.Links.ByName(want)
				if !ok {
					var names []string
					for _, l := range hf.Links.List {
						names = append(names, l.Name)
					}
					p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("interface %s does not exist on %s", want, node),
						"The host has: "+strings.Join(names, ", ")+".", interfaceFix(nw, node, hf))
					continue
				}
				if !link.Up() {
					detail, fix := "operstate "+link.OperState, fmt.Sprintf("bring it up: sudo ip link set %s up (and check the cable)", want)
					if slices.Contains(link.Flags, "UP") {
						// Administratively up, no link: the kernel says
						// NO-CARRIER. Setting it up again changes nothing.
						detail = "operstate " + link.OperState + ", flags " + strings.Join(link.Flags, ",") + ": the interface is up but has no carrier"
						fix = fmt.Sprintf("no carrier on %s: check the cable and the switch port it is plugged into", want)
					}
					p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("fabric interface %s is down on %s", want, node), detail, fix)
				}
				if nw.MTU > 0 && link.MTU != nw.MTU {
					p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("MTU of %s on %s is %d, want %d", want, node, link.MTU, nw.MTU),
						"", fmt.Sprintf("sudo ip link set %s mtu %d (and make it persistent in the host's network config)", want, nw.MTU))
				}
			}
			addr, ok := p.addrs[node]
			if !ok {
				var on []string
				for _, a := range hf.Addresses.In(nw.CIDR) {
					on = append(on, a.Prefix.String()+" on "+a.Interface)
				}
				detail := fmt.Sprintf("No address in %s", nw.CIDR)
				if want != "" {
					detail += " on " + want
				}
				if len(on) > 0 {
					detail += "; found " + strings.Join(on, ", ") + " instead"
				}
				detail += ". Ray, vLLM and NCCL would fall back to the default route's address, which the other nodes may not reach (the c10d failure)."
				ifname := want
				if ifname == "" {
					ifname = "<fabric interface>"
				}
				p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("%s has no address in %s", node, nw.CIDR), detail,
					fmt.Sprintf("assign one: sudo ip addr add %s dev %s", exampleAddr(nw.CIDR), ifname))
				continue
			}
			if other, dup := seen[addr]; dup {
				p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("%s and %s share the fabric address %s", other, node, addr),
					"Ray identifies nodes by IP: two nodes with one address register as one.", "give each node its own address in "+nw.CIDR.String())
			}
			seen[addr] = node
		}
		// Routes: every node must reach every peer over the fabric.
		for _, node := range nw.Nodes {
			hf := p.host(node)
			if hf == nil {
				continue
			}
			iface := p.ifaces[node]
			for _, rc := range hf.RouteChecks {
				if rc.Peer == "" || !slices.Contains(nw.Nodes, rc.Peer) {
					continue
				}
				if _, known := p.addrs[rc.Peer]; !known && !rc.Addr.IsValid() {
					// The peer's fabric address is unknown: its own
					// finding (unreachable, no such interface, no
					// address) says why; a route to nowhere adds nothing.
					continue
				}
				switch {
				case rc.Err != "":
					p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("%s has no route to %s's fabric address %s", node, rc.Peer, rc.Addr),
						rc.Err, fmt.Sprintf("check that %s and %s are on the same fabric subnet (%s) and the link is up", node, rc.Peer, nw.CIDR))
				case iface != "" && rc.Dev != "" && rc.Dev != iface:
					p.finding(plan.Error, nw.Addr, node,
						fmt.Sprintf("%s routes to %s (%s) via %s, not the fabric interface %s", node, rc.Peer, rc.Addr, rc.Dev, iface),
						"Traffic to the peer would leave on the wrong network (asymmetric routing); NCCL and c10d connections may hang or fail.",
						fmt.Sprintf("remove the conflicting route on %s (ip route show to match %s) so that %s is reached via %s", node, rc.Addr, rc.Addr, iface))
				}
			}
		}
	}
}

func exampleAddr(cidr netip.Prefix) string {
	a := cidr.Addr().Next()
	return netip.PrefixFrom(a, cidr.Bits()).String()
}

// interfaceFix says how to name node's fabric interface in nw: the
// interface that holds node's address in the CIDR when there is one, in
// the form nw already uses — one string for every node (correcting it
// fixes them all), or node's entry of the per-node map.
func interfaceFix(nw *Network, node string, hf *observe.HostFacts) string {
	name := "<name>"
	if in := hf.Addresses.In(nw.CIDR); len(in) > 0 {
		name = in[0].Interface
	}
	holds := ""
	if name != "<name>" {
		holds = fmt.Sprintf(" (%s holds %s's address in %s)", name, node, nw.CIDR)
	}
	if _, perNode := nw.Interfaces[node]; perNode {
		return fmt.Sprintf("set %s's entry of the interface map of %s: %q = %q%s", node, nw.Addr, node, name, holds)
	}
	return fmt.Sprintf("set interface = %q in %s%s; it names the fabric interface of every node", name, nw.Addr, holds)
}
