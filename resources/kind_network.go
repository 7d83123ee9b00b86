package resources

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
	"github.com/rayform/rayform/resources/kind"
)

// networkDescriptor is the network block: the fabric every layer of a Ray
// cluster binds to. Its interface map is decoded by the language
// (engine/config), which knows the network's nodes.
func networkDescriptor() config.Kind {
	return config.Kind{
		Type:    KindNetwork,
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
		Decode:  decodeNetwork,
		Check:   checkNetwork,
		Compute: computeNetwork,
	}
}

// decodeNetwork parses the cidr and decodes the interface argument. In the
// evaluation's second pass, which knows the nodes of the clusters on the
// network, it checks the interface map's keys against them and adds each
// node's fabric_interface.
func decodeNetwork(b *config.Block) {
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
	prior := View(b.Prior())
	if prior == nil {
		decodeInterface(b, n, nil, nil)
		return
	}
	members := networkMembers(prior, n.Name)
	decodeInterface(b, n, members, prior.Nodes)
	foldNodeInterfaces(b, n, members, prior.Nodes)
}

// networkMembers lists, sorted, the nodes of the clusters on network name.
func networkMembers(cfg *Config, name string) []string {
	out := []string{}
	for _, rc := range cfg.RayClusters {
		if rc.Network == name {
			out = append(out, rc.Nodes()...)
		}
	}
	sort.Strings(out)
	return out
}

// computeNetwork computes the addresses attribute: unknown until the
// network's nodes are known (the second pass), then each node's observed
// fabric address, unknown until observed.
func computeNetwork(b *config.Block) map[string]cty.Value {
	n := b.Value().(*Network)
	prior := View(b.Prior())
	if prior == nil {
		return map[string]cty.Value{"addresses": cty.UnknownVal(cty.Map(cty.String)).RefineNotNull()}
	}
	n.Nodes = networkMembers(prior, n.Name)
	n.Addresses = map[string]netip.Addr{}
	m := map[string]cty.Value{}
	for _, node := range n.Nodes {
		if a, ok := factsOf(b).FabricAddrs[node]; ok && a.IsValid() {
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
func decodeInterface(b *config.Block, n *Network, members []string, prior map[string]*Node) {
	checkKeys := prior != nil
	v, ok := b.Known("interface")
	if !ok {
		return
	}
	if s, err := convert.Convert(v, cty.String); err == nil && (v.Type() == cty.String) {
		n.Interface = s.AsString()
		if msg := checkIfname(n.Interface); msg != "" {
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
		if msg := checkIfname(n.Interfaces[key]); msg != "" {
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
func foldNodeInterfaces(b *config.Block, n *Network, members []string, nodes map[string]*Node) {
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

// checkIfname returns why name is not a valid Linux interface name, or "".
func checkIfname(name string) string {
	switch {
	case name == "" || name == "." || name == "..":
		return "is not an interface name"
	case len(name) > 15:
		return "is longer than 15 characters, the Linux limit for interface names"
	case strings.ContainsAny(name, "/: \t\n"):
		return "contains a character not allowed in interface names (slash, colon or space)"
	}
	return ""
}

// checkNetwork checks a network's arguments on their own.
func checkNetwork(b *config.Block) {
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

// networkKind is the network kind: its plan checks the fabric on each
// member node; it has nothing of its own on the hosts.
type networkKind struct{ kind.Base }

// Schema is the network block's descriptor.
func (networkKind) Schema() config.Kind { return networkDescriptor() }

// Traits: networks are neither replaced nor logged.
func (networkKind) Traits() kind.Traits {
	return kind.Traits{Exported: kind.Exported(networkDescriptor())}
}

// Plan checks the networks.
func (networkKind) Plan(p kind.Planner) { own(p).networks() }
