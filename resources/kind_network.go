package resources

import (
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
)

// networkKind is the network block: the fabric every layer of a Ray
// cluster binds to. Its interface map is decoded by the language
// (engine/config), which knows the network's nodes.
func networkKind() config.Kind {
	return config.Kind{
		Type:    "network",
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
		Check: checkNetwork,
	}
}

// checkNetwork checks a network's arguments on their own.
func checkNetwork(b *config.Block) {
	n := b.Value().(*config.Network)
	for i, hca := range n.IBHCA {
		if strings.TrimSpace(hca) == "" || strings.ContainsAny(hca, " \t,") {
			b.Error("ib_hca", "Invalid InfiniBand device", fmt.Sprintf("ib_hca[%d] is %q; each element must be one HCA name such as \"mlx5_0\" or \"mlx5_0:1\" (rayform joins them with commas for NCCL_IB_HCA).", i, hca))
		}
	}
}
