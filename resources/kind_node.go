package resources

import (
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/kind"
)

// nodeDescriptor is the node block: one SSH-reachable host. Its checks that
// involve references (bastion loops) and interface names are the
// language's (engine/config).
func nodeDescriptor() config.Kind {
	str, num, dyn := cty.String, cty.Number, cty.DynamicPseudoType
	return config.Kind{
		Type:    KindNode,
		Summary: "an SSH-reachable host",
		ForEach: true,
		Args: []config.Arg{
			{Name: "host", Type: str, Required: true, Exported: true,
				Description: "SSH address (name or IP) or a `Host` alias of `~/.ssh/config`"},
			{Name: "user", Type: str, Exported: true, DefaultDoc: "`~/.ssh/config`, else the local user",
				Description: "SSH user"},
			{Name: "port", Type: num, Min: 1, Max: 65535, Exported: true, DefaultDoc: "`~/.ssh/config`, else 22",
				Description: "SSH port (1–65535)"},
			{Name: "identity_file", Type: str, Exported: true, DefaultDoc: "agent and `~/.ssh/config`",
				Description: "private key file"},
			{Name: "bastion", Type: dyn, Ref: KindNode, Decoded: str, Exported: true, ExportDoc: "node name or null",
				CycleSummary: "Bastion cycle",
				CycleDetail:  "The bastions of these nodes form a loop: %s. A chain of SSH jumps must end at a node rayform can reach directly; remove the bastion argument from one of them.",
				Description:  "node to jump through (ProxyJump); chains allowed, loops are errors"},
			{Name: "gpus", Type: num, Default: cty.NumberIntVal(0), Min: 0, Max: 1 << 20, Exported: true,
				Description: "GPUs the node has; the cluster's nodes must declare at least `tensor_parallel_size × pipeline_parallel_size`"},
			{Name: "labels", Type: cty.Map(str), Exported: true,
				Description: "free-form labels"},
			{Name: "fabric_interface", Type: str, DefaultDoc: "the network's",
				Description: "this node's interface on the fabric of its cluster's network, e.g. `fabric_interface = each.value.iface` in a `for_each` block where names differ per host; the network's `interface` map may name the node too, but not differently"},
		},
		New:   func() any { return &Node{} },
		Check: checkNode,
	}
}

// checkNode checks a node's arguments on their own.
func checkNode(b *config.Block) {
	n := b.Value().(*Node)
	if b.IsSet("fabric_interface") {
		if msg := checkIfname(n.FabricInterface); msg != "" {
			b.Error("fabric_interface", "Invalid interface name", fmt.Sprintf("%q %s.", n.FabricInterface, msg))
		}
	}
	if n.Bastion != "" && n.Bastion == n.Name {
		b.Error("bastion", "Bastion cycle", fmt.Sprintf("Node %s names itself as its bastion. Remove the bastion argument, or name another node to jump through.", n.Name))
	}
	if b.IsSet("host") && strings.TrimSpace(n.Host) == "" {
		b.Error("host", "Empty host", "host must be an SSH address (a name or an IP address) or a Host alias from ~/.ssh/config.")
	}
}

// Node is one SSH-reachable host. A node block with for_each yields one Node
// per key.
type Node struct {
	config.Decl
	// Name identifies the node everywhere: the block label ("spark1"), or
	// for for_each instances the label and key (`gpu["h1"]`).
	Name string `rayform:",name"`
	// Block is the block label, Key the for_each key ("" without for_each).
	Block string `rayform:",label"`
	Key   string `rayform:",key"`

	Host         string            `rayform:"host"`          // SSH address or ~/.ssh/config alias
	User         string            `rayform:"user"`          // "" = from ~/.ssh/config or the local user
	Port         int               `rayform:"port"`          // 0 = from ~/.ssh/config or 22
	IdentityFile string            `rayform:"identity_file"` // "" = agent and ~/.ssh/config
	Bastion      string            `rayform:"bastion"`       // name of the node to jump through, "" for none
	GPUs         int               `rayform:"gpus"`          // declared GPUs
	Labels       map[string]string `rayform:"labels"`        // free-form
	// FabricInterface is the node's own interface on the fabric of its
	// cluster's network ("" = the network's); the network's interface map
	// may name it too, but not differently.
	FabricInterface string `rayform:"fabric_interface"`
}

// nodeKind is the node kind: its plan checks each node (reachable, docker
// usable, GPUs as declared); it has nothing of its own on the hosts.
type nodeKind struct{ kind.Base }

// Schema is the node block's descriptor.
func (nodeKind) Schema() config.Kind { return nodeDescriptor() }

// Traits: nodes are neither replaced nor logged.
func (nodeKind) Traits() kind.Traits { return kind.Traits{Exported: kind.Exported(nodeDescriptor())} }

// Plan checks the nodes.
func (nodeKind) Plan(p kind.Planner) { own(p).nodes() }
