package diagnose

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// defaultRayPort is Ray's default GCS port.
const defaultRayPort = 6379

// ipTagRE finds Ray's "ip=" tag of the process that printed a line.
var ipTagRE = regexp.MustCompile(`\bip=([0-9A-Fa-f.:]+)[,)]`)

// owner names the node an address belongs to and on which network.
type owner struct {
	node string // "" if no declared node has the address
	kind string // "fabric" or "management"
}

// ownerOf looks ip up in the declared fabric and management addresses.
func (c Context) ownerOf(ip string) owner {
	for _, n := range slices.Sorted(maps.Keys(c.NodeAddrs)) {
		if c.NodeAddrs[n] == ip {
			return owner{n, "fabric"}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(c.MgmtAddrs)) {
		if c.MgmtAddrs[n] == ip {
			return owner{n, "management"}
		}
	}
	return owner{}
}

// describe is "spark1's management address" or "" for an unknown address.
func (o owner) describe() string {
	if o.node == "" {
		return ""
	}
	return o.node + "'s " + o.kind + " address"
}

// inFabric reports whether ip is inside the fabric; known is false when the
// fabric or the address is unknown.
func (c Context) inFabric(ip string) (in, known bool) {
	a, err := netip.ParseAddr(strings.Trim(ip, "[]"))
	if err != nil || !c.FabricCIDR.IsValid() {
		return false, false
	}
	return c.FabricCIDR.Contains(a.Unmap()), true
}

// ncclHostRE is the prefix NCCL puts on its lines: "host:pid:tid [dev] ".
var ncclHostRE = regexp.MustCompile(`^(?:\[\d+\] )?([A-Za-z0-9][\w.\-]*):\d+:\d+ \[\d+\] `)

// nodeOf names the node behind a line: the Ray "ip=" tag of the process that
// printed it when it maps to a declared node, otherwise the log's host; a
// log read without a host (a pasted file) names it in the line itself:
// Ray's "ip=" tag, NCCL's "host:pid:tid [dev]" prefix.
func (s *scan) nodeOf(i int) string {
	if m := ipTagRE.FindStringSubmatch(s.lines[i].text); m != nil {
		if o := s.ctx.ownerOf(m[1]); o.node != "" {
			return o.node
		}
		if s.host(i) == "" {
			return m[1]
		}
	}
	if h := s.host(i); h != "" {
		return h
	}
	if m := ncclHostRE.FindStringSubmatch(s.lines[i].body); m != nil {
		return m[1]
	}
	return ""
}

// head is the head node: declared, or guessed as the owner of addr.
func (c Context) head(addr string) string {
	if c.HeadNode != "" {
		return c.HeadNode
	}
	return c.ownerOf(addr).node
}

// rayPort is the declared GCS port or Ray's default.
func (c Context) rayPort() int {
	if c.RayPort > 0 {
		return c.RayPort
	}
	return defaultRayPort
}

// imageRef is the image for a command line: its name or "<image>".
func (c Context) imageRef() string { return orDefault(c.Image, "<image>") }

// onRay reports whether the context describes a deployment on Ray (a
// cluster, a head or several nodes); a bare log's context does not.
func (c Context) onRay() bool {
	return c.Cluster != "" || c.HeadNode != "" || len(c.NodeAddrs) > 1
}

// cluster, network and serve name the resources in fixes.
func (c Context) cluster() string { return orDefault(c.Cluster, "the ray_cluster") }
func (c Context) network() string { return orDefault(c.Network, "the fabric network block") }
func (c Context) serve() string   { return orDefault(c.Serve, "the vllm_serve") }

// image names the image in text.
func (c Context) image() string {
	if c.Image == "" {
		return "the image"
	}
	return c.Image
}

// bindingFix is the fix for every "layers disagree on the address" cause:
// bind Ray and vLLM to the fabric, with per-node commands when known.
func (c Context) bindingFix(headHint string) string {
	var b strings.Builder
	net := "the fabric"
	if c.FabricCIDR.IsValid() {
		net = "the fabric " + c.FabricCIDR.String()
	}
	fmt.Fprintf(&b, "Bind Ray and vLLM to %s on every node: set network = %s on %s — rayform then starts Ray with --node-ip-address=<fabric IP> and sets VLLM_HOST_IP=<fabric IP> in each node's container — and run rayform apply to recreate the containers.",
		net, orDefault(c.Network, "network.<fabric>"), c.cluster())
	head := c.head(headHint)
	nodes := slices.Sorted(maps.Keys(c.NodeAddrs))
	if len(nodes) == 0 {
		b.WriteString("\nBy hand: ray start --node-ip-address=<this node's fabric IP> on head and workers (workers with --address=<head fabric IP>:" + fmt.Sprint(c.rayPort()) + "), and VLLM_HOST_IP=<this node's fabric IP> in every container.")
		return b.String()
	}
	b.WriteString("\nBy hand:")
	w := 0
	for _, n := range nodes {
		w = max(w, len(n))
	}
	headIP := c.NodeAddrs[head]
	order := nodes
	if headIP != "" {
		order = append([]string{head}, without(nodes, head)...)
	}
	for _, n := range order {
		ip := c.NodeAddrs[n]
		if n == head && headIP != "" {
			fmt.Fprintf(&b, "\n  %-*s  ray start --head --node-ip-address=%s; VLLM_HOST_IP=%s", w+1, n+":", ip, ip)
			continue
		}
		addr := "<head fabric IP>"
		if headIP != "" {
			addr = headIP
		}
		fmt.Fprintf(&b, "\n  %-*s  ray start --address=%s:%d --node-ip-address=%s; VLLM_HOST_IP=%s", w+1, n+":", addr, c.rayPort(), ip, ip)
	}
	if c.FabricInterface != "" {
		fmt.Fprintf(&b, "\n  %-*s  NCCL_SOCKET_IFNAME=%s GLOO_SOCKET_IFNAME=%s", w+1, "all:", c.FabricInterface, c.FabricInterface)
	}
	return b.String()
}

// without returns list without x.
func without(list []string, x string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// floor2 rounds x down to two decimals.
func floor2(x float64) float64 { return math.Floor(x*100+1e-9) / 100 }

// pct formats a fraction as a percentage with one decimal.
func pct(x float64) string { return fmt.Sprintf("%.1f%%", x*100) }
