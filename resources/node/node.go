// Package node is the node kind: one SSH-reachable host. Its plan checks
// that each node can be observed and has the GPUs it declares; it has
// nothing of its own on the hosts.
package node

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/ifname"
)

// Type is the node kind's block type.
const Type = "node"

// Descriptor is the node block: one SSH-reachable host. Its checks that
// involve references (bastion loops) and interface names are the
// language's (engine/config).
func Descriptor() config.Kind {
	str, num, dyn := cty.String, cty.Number, cty.DynamicPseudoType
	return config.Kind{
		Type:    Type,
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
			{Name: "bastion", Type: dyn, Ref: Type, Decoded: str, Exported: true, ExportDoc: "node name or null",
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
		Check: check,
	}
}

// check checks a node's arguments on their own.
func check(b *config.Block) {
	n := b.Value().(*Node)
	if b.IsSet("fabric_interface") {
		if msg := ifname.InterfaceProblem(n.FabricInterface); msg != "" {
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

// Kind is the node kind (kind.Kind): the hosts themselves.
type Kind struct{}

var _ kind.KindWithHosts = Kind{}

// Hosts are the nodes of cfg and how each is reached, by name.
func (Kind) Hosts(cfg *config.Config) []kind.Host {
	blocks := kind.BlocksOf[Node](cfg, Type)
	out := make([]kind.Host, 0, len(blocks))
	for _, name := range slices.Sorted(maps.Keys(blocks)) {
		n := blocks[name]
		out = append(out, kind.Host{Name: name, Host: n.Host, User: n.User, Port: n.Port, Bastion: n.Bastion, IdentityFile: n.IdentityFile})
	}
	return out
}

// Schema is the node block's descriptor.
func (Kind) Schema() config.Kind { return Descriptor() }

// Traits: nodes are neither replaced nor logged.
func (Kind) Traits() kind.Traits { return kind.Traits{Exported: kind.Exported(Descriptor())} }

// Plan checks each node: reachable, GPUs as declared. (Whether docker is
// usable is the concern of the kinds that run containers.)
func (Kind) Plan(p kind.Planner) {
	cfg, facts := p.Config(), p.Facts()
	blocks := cfg.Blocks(Type)
	names := make([]string, 0, len(blocks))
	for name := range blocks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := blocks[name].(*Node)
		addr := n.Addr
		if err, ok := facts.Errors[n.Name]; ok {
			p.Unreachable(n.Name)
			p.Finding(plan.Finding{Severity: plan.Error, Address: addr, Host: n.Name, Summary: fmt.Sprintf("cannot observe %s", n.Name), Detail: err.Error(),
				Fix: "check that `ssh " + sshTarget(n) + "` works from this machine (host key in known_hosts, key in the agent or identity_file)"})
			continue
		}
		hf := kind.Usable(facts, n.Name)
		if hf == nil {
			continue
		}
		switch {
		case hf.GPUs.Err != "" && n.GPUs > 0:
			p.Finding(plan.Finding{Severity: plan.Warning, Address: addr, Host: n.Name, Summary: fmt.Sprintf("cannot verify the GPUs of %s", n.Name),
				Detail: "nvidia-smi: " + hf.GPUs.Err, Fix: "install the NVIDIA driver, or check that nvidia-smi runs for the SSH user"})
		case hf.GPUs.Err == "" && len(hf.GPUs.List) != n.GPUs:
			gpus := []string{}
			for _, g := range hf.GPUs.List {
				gpus = append(gpus, g.Name)
			}
			p.Finding(plan.Finding{Severity: plan.Error, Address: addr, Host: n.Name,
				Summary: fmt.Sprintf("%s declares gpus = %d but nvidia-smi reports %d", n.Name, n.GPUs, len(hf.GPUs.List)),
				Detail:  strings.Join(gpus, ", "), Fix: fmt.Sprintf("set gpus = %d, or fix the host's driver", len(hf.GPUs.List))})
		}
	}
}

// sshTarget is how a user reaches n with ssh, for a finding's fix.
func sshTarget(n *Node) string {
	t := n.Host
	if n.User != "" {
		t = n.User + "@" + t
	}
	if n.Port != 0 && n.Port != 22 {
		t += " -p " + strconv.Itoa(n.Port)
	}
	return t
}
