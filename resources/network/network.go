// Package network is the network kind: the fabric every layer of a Ray
// cluster binds to. Its plan checks the fabric on each member node; what
// it pins in the containers (NodeEnv) is read by the kinds that run them.
// It has nothing of its own on the hosts.
package network

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/ifname"
	"github.com/rayform/rayform/resources/node"
)

// Type is the network kind's block type.
const Type = "network"

// Descriptor is the network block: the fabric every layer of a Ray
// cluster binds to. Its interface map is decoded by the language
// (engine/config), which knows the network's nodes.
func Descriptor() config.Kind {
	return config.Kind{
		Type:    Type,
		Summary: "the fabric every layer must use",
		Args: []config.Arg{
			{Name: "cidr", Type: cty.String, Required: true, Exported: true,
				Description: "the fabric subnet, e.g. `\"192.168.200.0/24\"`; each node's address in it is observed"},
			{Name: "interface", Type: cty.DynamicPseudoType, Exported: true, TypeDoc: "string, or map(string)", DefaultDoc: "observed",
				Description: "the fabric interface on every node, or a map from node name (or the `for_each` key of exactly one node, as in `{ for k, h in var.hosts : k => h.iface }`) to interface name where names differ per host (a node missing from the map uses its `fabric_interface`, else the observed interface holding its address)"},
			{Name: "ib_hca", Type: cty.List(cty.String), Exported: true, DefaultDoc: "not pinned",
				Description: "InfiniBand/RoCE HCAs for NCCL, e.g. `[\"mlx5_0\", \"mlx5_1\"]`"},
			{Name: "mtu", Type: cty.Number, Min: 68, Max: 65535, Exported: true, DefaultDoc: "not checked",
				Description: "expected MTU of the fabric interface (68–65535), for `plan` to compare with the host"},
		},
		Computed: []config.Attr{
			{Name: "addresses", Doc: "map from node name to fabric address, for the nodes of the clusters on the network (*observe*)"},
		},
		New:     func() any { return &Network{} },
		Decode:  decode,
		Check:   check,
		Compute: compute,
	}
}

// decode parses the cidr and decodes the interface argument. In the
// evaluation's second pass, which knows the nodes of the clusters on the
// network, it checks the interface map's keys against them and adds each
// node's fabric_interface.
func decode(b *config.Block) {
	n := b.Value().(*Network)
	if s, ok := b.Known("cidr"); ok {
		p, err := netip.ParsePrefix(s.AsString())
		switch {
		case err != nil:
			why := strings.TrimSuffix(err.Error(), ".")
			if _, after, ok := strings.Cut(why, "): "); ok {
				why = after
			}
			b.Error("cidr", "Invalid CIDR", fmt.Sprintf("%q is not a CIDR prefix: %s. Write the fabric subnet as ADDRESS/BITS, like \"192.168.200.0/24\".",
				s.AsString(), why))
		case p != p.Masked():
			b.Error("cidr", "CIDR has host bits set", fmt.Sprintf("%s has bits set after the prefix length, so it is an address, not a network. The network is %s; write cidr = %q.",
				p, p.Masked(), p.Masked().String()))
		default:
			n.CIDR = p
		}
	}
	prior := b.Prior()
	if prior == nil {
		decodeInterface(b, n, nil, nil)
		return
	}
	members := Members(prior, n.Name)
	nodes := nodesOf(prior)
	decodeInterface(b, n, members, nodes)
	foldNodeInterfaces(b, n, members, nodes)
}

// Member is the value of a block that puts nodes on a network (a
// ray_cluster): the network learns its nodes from the blocks of any kind
// whose Go value implements it.
type Member interface {
	// NetworkNodes returns the name of the network the block binds ("" for
	// none) and the nodes it puts on it.
	NetworkNodes() (network string, nodes []string)
}

// Members lists, sorted, the nodes the blocks of cfg put on network name.
func Members(cfg *config.Config, name string) []string {
	out := []string{}
	for _, typ := range cfg.Kinds() {
		for _, v := range cfg.Blocks(typ) {
			if m, ok := v.(Member); ok {
				if nw, nodes := m.NetworkNodes(); nw == name {
					out = append(out, nodes...)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// nodesOf returns the node blocks of cfg by name.
func nodesOf(cfg *config.Config) map[string]*node.Node {
	out := map[string]*node.Node{}
	for name, v := range cfg.Blocks(node.Type) {
		out[name] = v.(*node.Node)
	}
	return out
}

// compute computes the addresses attribute: unknown until the
// network's nodes are known (the second pass), then each node's observed
// fabric address, unknown until observed.
func compute(b *config.Block) map[string]cty.Value {
	n := b.Value().(*Network)
	prior := b.Prior()
	if prior == nil {
		return map[string]cty.Value{"addresses": cty.UnknownVal(cty.Map(cty.String)).RefineNotNull()}
	}
	n.Nodes = Members(prior, n.Name)
	n.Addresses = map[string]netip.Addr{}
	m := map[string]cty.Value{}
	for _, node := range n.Nodes {
		if a, ok := kind.FactsOf(b).FabricAddrs[node]; ok && a.IsValid() {
			n.Addresses[node] = a
			m[node] = cty.StringVal(a.String())
		} else {
			m[node] = cty.UnknownVal(cty.String).RefineNotNull()
		}
	}
	if len(m) == 0 {
		return map[string]cty.Value{"addresses": cty.MapValEmpty(cty.String)}
	}
	return map[string]cty.Value{"addresses": cty.MapVal(m)}
}

// decodeInterface decodes a network's interface argument: one name, or a map
// from node name to name. With members known it checks the map's keys.
func decodeInterface(b *config.Block, n *Network, members []string, prior map[string]*node.Node) {
	checkKeys := prior != nil
	v, ok := b.Known("interface")
	if !ok {
		return
	}
	if s, err := convert.Convert(v, cty.String); err == nil && (v.Type() == cty.String) {
		n.Interface = s.AsString()
		if msg := ifname.InterfaceProblem(n.Interface); msg != "" {
			b.Error("interface", "Invalid interface name", fmt.Sprintf("%q %s.", n.Interface, msg))
		}
		return
	}
	m, err := convert.Convert(v, cty.Map(cty.String))
	if err != nil || !(v.Type().IsObjectType() || v.Type().IsMapType()) || !m.IsWhollyKnown() {
		b.Error("interface", "Incorrect attribute value type",
			fmt.Sprintf("interface must be an interface name, like \"enp1s0f1np1\", or a map from node name to interface name, like { spark1 = \"enp1s0f1np1\" }; got a %s.", v.Type().FriendlyName()))
		return
	}
	n.Interfaces = map[string]string{}
	for it := m.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() {
			continue
		}
		n.Interfaces[k.AsString()] = e.AsString()
	}
	for _, key := range slices.Sorted(maps.Keys(n.Interfaces)) {
		if msg := ifname.InterfaceProblem(n.Interfaces[key]); msg != "" {
			b.Error("interface", "Invalid interface name", fmt.Sprintf("The interface for %s, %q, %s.", key, n.Interfaces[key], msg))
		}
		if !checkKeys || slices.Contains(members, key) {
			continue
		}
		// A for_each key names the instance of that key, when exactly one
		// node of the network has it: { for k, h in var.hosts : k => h.iface }.
		var byKey []string
		for _, m := range members {
			if node := prior[m]; node != nil && node.Key == key {
				byKey = append(byKey, m)
			}
		}
		if len(byKey) == 1 {
			if iface, dup := n.Interfaces[byKey[0]]; dup && iface != n.Interfaces[key] {
				b.Error("interface", "Conflicting interfaces", fmt.Sprintf("The interface map gives %s both %q (as %q) and %q (as %q); keep one key.", byKey[0], n.Interfaces[key], key, iface, byKey[0]))
			}
			n.Interfaces[byKey[0]] = n.Interfaces[key]
			delete(n.Interfaces, key)
			continue
		}
		detail := fmt.Sprintf("The interface map names %q, which is not a node of any Ray cluster on network.%s", key, n.Name)
		switch {
		case len(byKey) > 1:
			detail = fmt.Sprintf("The interface map names %q, the for_each key of several nodes on network.%s (%s); key the map by node name instead.", key, n.Name, strings.Join(byKey, ", "))
		case len(members) > 0:
			detail += fmt.Sprintf(" (its nodes are %s).", strings.Join(members, ", "))
		default:
			detail += "; no cluster uses this network."
		}
		if len(byKey) == 0 {
			if b.IsComputed("interface") {
				detail += " A computed map's keys must be node names, or the for_each keys of the node blocks; " +
					"or give each node its own interface with fabric_interface in the node block (fabric_interface = each.value.iface)."
			} else {
				var keys []string
				for _, m := range members {
					keys = append(keys, m)
					if node := prior[m]; node != nil && node.Key != "" {
						keys = append(keys, node.Key)
					}
				}
				detail += config.DidYouMean(key, keys, "%q") + " Keys are node names, or the for_each key of one node."
			}
		}
		b.Error("interface", "Interface for a node not on this network", detail)
	}
}

// foldNodeInterfaces adds the fabric_interface of each node of the network
// to its interface map; a node the map names differently is an error.
func foldNodeInterfaces(b *config.Block, n *Network, members []string, nodes map[string]*node.Node) {
	for _, m := range members {
		node := nodes[m]
		if node == nil || node.FabricInterface == "" {
			continue
		}
		if iface, ok := n.Interfaces[m]; ok && iface != node.FabricInterface {
			b.Error("interface", "Conflicting interfaces", fmt.Sprintf("The interface map gives %s %q, but node %s declares fabric_interface = %q. Keep one.", m, iface, m, node.FabricInterface))
			continue
		}
		if n.Interfaces == nil {
			n.Interfaces = map[string]string{}
		}
		n.Interfaces[m] = node.FabricInterface
	}
}

// check checks a network's arguments on their own.
func check(b *config.Block) {
	n := b.Value().(*Network)
	for i, hca := range n.IBHCA {
		if strings.TrimSpace(hca) == "" || strings.ContainsAny(hca, " \t,") {
			b.Error("ib_hca", "Invalid InfiniBand device", fmt.Sprintf("ib_hca[%d] is %q; each element must be one HCA name such as \"mlx5_0\" or \"mlx5_0:1\" (rayform joins them with commas for NCCL_IB_HCA).", i, hca))
		}
	}
}

// Network is the fabric every layer of a Ray cluster must bind to.
type Network struct {
	config.Decl
	Name string `rayform:",name"`
	CIDR netip.Prefix
	// Interface is the interface name for every node, "" when not pinned.
	Interface string
	// Interfaces maps node names to interface names where they differ
	// per host; it takes precedence over Interface.
	Interfaces map[string]string
	IBHCA      []string `rayform:"ib_hca"` // NCCL_IB_HCA devices, empty = not pinned
	MTU        int      `rayform:"mtu"`    // 0 = not verified
	// Nodes lists, sorted, the nodes of the Ray clusters on this network.
	Nodes []string
	// Addresses maps node names to their observed fabric addresses; a node
	// is absent until observed.
	Addresses map[string]netip.Addr
}

// Kind is the network kind (kind.Kind).
type Kind struct{}

// Schema is the network block's descriptor.
func (Kind) Schema() config.Kind { return Descriptor() }

// Traits: networks are neither replaced nor logged.
func (Kind) Traits() kind.Traits { return kind.Traits{Exported: kind.Exported(Descriptor())} }

// sorted returns the networks of cfg sorted by name.
func sorted(cfg *config.Config) []*Network {
	blocks := cfg.Blocks(Type)
	out := make([]*Network, 0, len(blocks))
	for _, k := range slices.Sorted(maps.Keys(blocks)) {
		out = append(out, blocks[k].(*Network))
	}
	return out
}

// Found reads each member node's fabric address from the facts (see
// observe.Fabric.Find), and the interface holding it.
func (n *Network) Found(facts *observe.Facts) (map[string]netip.Addr, map[string]string) {
	addrs := map[string]netip.Addr{}
	ifaces := map[string]string{}
	for _, nd := range n.Nodes {
		hf := facts.Hosts[nd]
		if hf == nil {
			continue
		}
		if a, iface, ok := n.Fabric(nd).Find(hf); ok {
			addrs[nd], ifaces[nd] = a, iface
		}
	}
	return addrs, ifaces
}

// Fabric is what observe looks for on node: the interface the network
// pins there ("" for any) and the CIDR.
func (n *Network) Fabric(nd string) observe.Fabric {
	return observe.Fabric{Interface: n.InterfaceFor(nd), CIDR: n.CIDR}
}

// InterfaceFor returns the interface the network pins on node: its entry in
// Interfaces, else Interface, else "" (taken from observation).
func (n *Network) InterfaceFor(node string) string {
	if i, ok := n.Interfaces[node]; ok {
		return i
	}
	return n.Interface
}

// pins lists, in order, the environment variables a network pins in
// the Ray container of each node, with the argument that sets each.
func pins() []struct{ key, from string } {
	return []struct{ key, from string }{
		{"VLLM_HOST_IP", "the network's address of each node"},
		{"NCCL_SOCKET_IFNAME", "the network's interface"},
		{"GLOO_SOCKET_IFNAME", "the network's interface"},
		{"TP_SOCKET_IFNAME", "the network's interface"},
		{"UCX_NET_DEVICES", "the network's interface"},
		{"NCCL_IB_HCA", "the network's ib_hca"},
	}
}

// Pins lists the environment variables a network pins in the containers
// of its nodes (NodeEnv), with the argument that sets each.
func Pins() map[string]string {
	out := map[string]string{}
	for _, p := range pins() {
		out[p.key] = p.from
	}
	return out
}

// EnvKeys returns the variables a network binding pins on every node
// ([Network.NodeEnv]), in order. They differ per host, so they are also
// listed in vLLM's ray_non_carry_over_env_vars.json: the head's values
// must not overwrite a worker's.
func EnvKeys() []string {
	var out []string
	for _, p := range pins() {
		out = append(out, p.key)
	}
	return out
}

// NodeEnv returns the environment variables the network pins in the Ray
// container on node, so that Ray, vLLM, NCCL, Gloo, TensorPipe and UCX all
// use the fabric:
//
//	VLLM_HOST_IP        the node's fabric address (also Ray's --node-ip-address)
//	NCCL_SOCKET_IFNAME  the fabric interface
//	GLOO_SOCKET_IFNAME  the fabric interface
//	TP_SOCKET_IFNAME    the fabric interface
//	UCX_NET_DEVICES     the fabric interface; with ib_hca, the RDMA devices
//	                    as UCX names them, <hca>:<port> (port 1 unless given)
//	NCCL_IB_HCA         ib_hca joined with commas (only when ib_hca is set)
//
// addr is the node's observed address on the network; observedIface is the
// interface observed to hold it, used when the network does not pin one.
func (n *Network) NodeEnv(node string, addr netip.Addr, observedIface string) (map[string]string, error) {
	if !n.CIDR.IsValid() || !n.CIDR.Contains(addr) {
		return nil, fmt.Errorf("network %s: node %s: address %s is not in %s", n.Name, node, addr, n.CIDR)
	}
	iface := n.InterfaceFor(node)
	if iface == "" {
		iface = observedIface
	}
	if iface == "" {
		return nil, fmt.Errorf("network %s: node %s: no interface pinned and none observed for %s", n.Name, node, addr)
	}
	env := map[string]string{
		"VLLM_HOST_IP":       addr.String(),
		"NCCL_SOCKET_IFNAME": iface,
		"GLOO_SOCKET_IFNAME": iface,
		"TP_SOCKET_IFNAME":   iface,
		"UCX_NET_DEVICES":    iface,
	}
	if len(n.IBHCA) > 0 {
		env["NCCL_IB_HCA"] = strings.Join(n.IBHCA, ",")
		if dev := ucxDevices(n.IBHCA); dev != "" {
			env["UCX_NET_DEVICES"] = dev
		}
	}
	return env, nil
}

// ucxDevices is UCX_NET_DEVICES for the HCAs NCCL_IB_HCA names: UCX takes
// RDMA devices as <hca>:<port> (a netdev name limits UCX to TCP). NCCL's
// "=" (exact match) prefix is dropped; an exclusion list ("^mlx5_1") has no
// UCX form, so "" keeps the netdev.
func ucxDevices(hcas []string) string {
	var out []string
	for _, h := range hcas {
		h = strings.TrimPrefix(h, "=")
		if strings.HasPrefix(h, "^") {
			return ""
		}
		if !strings.Contains(h, ":") {
			h += ":1"
		}
		out = append(out, h)
	}
	return strings.Join(out, ",")
}

// Plan checks every node of every network: its fabric address exists
// inside the CIDR on the pinned interface, the link is up with the declared
// MTU, no two nodes share an address, and every node routes to every peer
// over the fabric interface.
func (Kind) Plan(p kind.Planner) {
	facts := p.Facts()
	find := func(addr, host, summary, detail, fix string) {
		p.Finding(plan.Finding{Severity: plan.Error, Address: addr, Host: host, Summary: summary, Detail: detail, Fix: fix})
	}
	for _, nw := range sorted(p.Config()) {
		addrs, ifaces := nw.Found(facts)
		nw.checkNodes(facts, addrs, find)
		// Routes: every node must reach every peer over the fabric.
		for _, node := range nw.Nodes {
			if hf := kind.Usable(facts, node); hf != nil {
				nw.checkRoutes(node, hf, addrs, ifaces[node], find)
			}
		}
	}
}

// finder reports an error finding of the plan.
type finder func(addr, host, summary, detail, fix string)

// checkNodes finds, on every observed node, a fabric interface missing,
// down or of another MTU, no address in the network's CIDR, and an
// address two nodes share.
func (n *Network) checkNodes(facts *observe.Facts, addrs map[string]netip.Addr, find finder) {
	seen := map[netip.Addr]string{}
	for _, node := range n.Nodes {
		hf := kind.Usable(facts, node)
		if hf == nil {
			continue
		}
		if want := n.InterfaceFor(node); want != "" && !n.checkLink(node, hf, want, find) {
			continue
		}
		addr, ok := addrs[node]
		if !ok {
			n.noAddress(node, hf, find)
			continue
		}
		if other, dup := seen[addr]; dup {
			find(n.Addr, node, fmt.Sprintf("%s and %s share the fabric address %s", other, node, addr),
				"Ray identifies nodes by IP: two nodes with one address register as one.", "give each node its own address in "+n.CIDR.String())
		}
		seen[addr] = node
	}
}

// checkLink finds the declared interface want missing on node (ok false),
// down, or of another MTU than the network's.
func (n *Network) checkLink(node string, hf *observe.HostFacts, want string, find finder) (ok bool) {
	link, ok := hf.Links.ByName(want)
	if !ok {
		var names []string
		for _, l := range hf.Links.List {
			names = append(names, l.Name)
		}
		find(n.Addr, node, fmt.Sprintf("interface %s does not exist on %s", want, node),
			"The host has: "+strings.Join(names, ", ")+".", interfaceFix(n, node, hf))
		return false
	}
	if !link.Up() {
		detail, fix := "operstate "+link.OperState, fmt.Sprintf("bring it up: sudo ip link set %s up (and check the cable)", want)
		if slices.Contains(link.Flags, "UP") {
			// Administratively up, no link: the kernel says NO-CARRIER.
			// Setting it up again changes nothing.
			detail = "operstate " + link.OperState + ", flags " + strings.Join(link.Flags, ",") + ": the interface is up but has no carrier"
			fix = fmt.Sprintf("no carrier on %s: check the cable and the switch port it is plugged into", want)
		}
		find(n.Addr, node, fmt.Sprintf("fabric interface %s is down on %s", want, node), detail, fix)
	}
	if n.MTU > 0 && link.MTU != n.MTU {
		find(n.Addr, node, fmt.Sprintf("MTU of %s on %s is %d, want %d", want, node, link.MTU, n.MTU),
			"", fmt.Sprintf("sudo ip link set %s mtu %d (and make it persistent in the host's network config)", want, n.MTU))
	}
	return true
}

// noAddress reports that node has no address in the network's CIDR (on
// its declared interface), naming what it has instead.
func (n *Network) noAddress(node string, hf *observe.HostFacts, find finder) {
	want := n.InterfaceFor(node)
	var on []string
	for _, a := range hf.Addresses.In(n.CIDR) {
		on = append(on, a.Prefix.String()+" on "+a.Interface)
	}
	detail := fmt.Sprintf("No address in %s", n.CIDR)
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
	find(n.Addr, node, fmt.Sprintf("%s has no address in %s", node, n.CIDR), detail,
		fmt.Sprintf("assign one: sudo ip addr add %s dev %s", exampleAddr(n.CIDR), ifname))
}

// checkRoutes finds, on node, a peer of the network it has no route to,
// or reaches through another interface than its fabric interface iface.
func (n *Network) checkRoutes(node string, hf *observe.HostFacts, addrs map[string]netip.Addr, iface string, find finder) {
	for _, rc := range hf.RouteChecks {
		if rc.Peer == "" || !slices.Contains(n.Nodes, rc.Peer) {
			continue
		}
		if _, known := addrs[rc.Peer]; !known && !rc.Addr.IsValid() {
			// The peer's fabric address is unknown: its own finding
			// (unreachable, no such interface, no address) says why; a
			// route to nowhere adds nothing.
			continue
		}
		switch {
		case rc.Err != "":
			find(n.Addr, node, fmt.Sprintf("%s has no route to %s's fabric address %s", node, rc.Peer, rc.Addr),
				rc.Err, fmt.Sprintf("check that %s and %s are on the same fabric subnet (%s) and the link is up", node, rc.Peer, n.CIDR))
		case iface != "" && rc.Dev != "" && rc.Dev != iface:
			find(n.Addr, node,
				fmt.Sprintf("%s routes to %s (%s) via %s, not the fabric interface %s", node, rc.Peer, rc.Addr, rc.Dev, iface),
				"Traffic to the peer would leave on the wrong network (asymmetric routing); NCCL and c10d connections may hang or fail.",
				fmt.Sprintf("remove the conflicting route on %s (ip route show to match %s) so that %s is reached via %s", node, rc.Addr, rc.Addr, iface))
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

// Subnet is the network's subnet (its cidr): a kind that moves data
// between nodes (a model's staging) learns from it which nodes reach each
// other on their fabric addresses.
func (n *Network) Subnet() netip.Prefix { return n.CIDR }
