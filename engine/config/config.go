package config

import (
	"net/netip"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Config is an evaluated configuration: every block of a directory decoded
// into plain Go values. Values known only after observing the hosts (a node's
// fabric address and everything derived from it) are absent until the
// configuration is re-evaluated with [Config.WithFacts].
//
// Maps are keyed by name: Nodes by node name (see [Node.Name]), the others by
// their block label.
type Config struct {
	// Files holds every parsed file (configuration and variable files) by
	// name, for rendering diagnostics with source snippets.
	Files map[string]*hcl.File

	Variables   map[string]*Variable
	Locals      map[string]*Local
	Nodes       map[string]*Node
	Networks    map[string]*Network
	RayClusters map[string]*RayCluster
	Serves      map[string]*VLLMServe
	Outputs     map[string]*Output

	// Project is the deployment's name from the `rayform { project = ... }`
	// block, "" when the configuration does not declare one (the CLI then
	// falls back to the state's record, then the directory's name).
	// ProjectRange is where it is declared.
	Project      string
	ProjectRange hcl.Range

	// Facts are the observed facts this configuration was evaluated with.
	Facts Facts

	mod   *module
	vars  map[string]cty.Value       // resolved input variables, marked when sensitive
	edges map[string]map[string]bool // instance-level dependencies, from → to
	// blocks are the evaluated resource blocks: kind → instance name →
	// the kind's Go value ([Kind.New]).
	blocks map[string]map[string]any
}

// Blocks returns the evaluated blocks of kind by instance name: pointers
// to the kind's Go values ([Kind.New]). The map is the configuration's;
// callers must not modify it.
func (c *Config) Blocks(kind string) map[string]any { return c.blocks[kind] }

// Kinds lists the block types of the registered kinds, in registration
// order.
func (c *Config) Kinds() []string {
	if c.mod == nil {
		return nil
	}
	return c.mod.kindOrder
}

// add records an evaluated block.
func (c *Config) add(kind, name string, v any) {
	if c.blocks[kind] == nil {
		c.blocks[kind] = map[string]any{}
	}
	c.blocks[kind][name] = v
	switch v := v.(type) {
	case *Node:
		c.Nodes[name] = v
	case *Network:
		c.Networks[name] = v
	case *RayCluster:
		c.RayClusters[name] = v
	case *VLLMServe:
		c.Serves[name] = v
	}
}

// Declarer is implemented by every kind's Go value through its embedded
// [Decl].
type Declarer interface{ Declaration() *Decl }

// Declaration returns d, so that a value embedding a Decl is a [Declarer].
func (d *Decl) Declaration() *Decl { return d }

// Facts are what observing the hosts teaches the configuration.
type Facts struct {
	// FabricAddrs maps a node name to the node's observed address on the
	// network of its Ray cluster.
	FabricAddrs map[string]netip.Addr
}

// Decl is what every evaluated block records about its source and values.
type Decl struct {
	// Addr is the block's address, e.g. "ray_cluster.main" or
	// `node.gpu["h1"]`. It is the block's name in [Config.Graph].
	Addr string
	// DeclRange is the block header's range.
	DeclRange hcl.Range
	// AttrRanges maps each attribute that was set to its expression's range.
	AttrRanges map[string]hcl.Range
	// DependsOn lists, sorted, the addresses this block refers to.
	DependsOn []string
	// Sensitive lists attribute paths holding values derived from sensitive
	// variables, e.g. `env["HF_TOKEN"]`; a renderer prints them as
	// "(sensitive value)".
	Sensitive []string
	// Unknown lists attribute paths whose values are known only after
	// observing the hosts; their Go fields hold zero values until then.
	Unknown []string
	// Args holds every argument of the block's [Schema] as decoded:
	// defaults applied, references as the names they resolve to, null for
	// an unset argument without a default. Values are unmarked (see
	// Sensitive) and may be unknown before the hosts are observed.
	Args map[string]cty.Value
}

// Range returns the range of attribute attr, or the block's DeclRange when
// the attribute was not set.
func (d *Decl) Range(attr string) hcl.Range {
	if r, ok := d.AttrRanges[attr]; ok {
		return r
	}
	return d.DeclRange
}

// IsSensitive reports whether the value at path (e.g. "env" or
// `env["HF_TOKEN"]`) is sensitive or contains a sensitive value.
func (d *Decl) IsSensitive(path string) bool { return pathMatch(d.Sensitive, path) }

// IsUnknown reports whether the value at path is, or contains, a value known
// only after observing the hosts.
func (d *Decl) IsUnknown(path string) bool { return pathMatch(d.Unknown, path) }

// pathMatch reports whether path is in paths, is below one of them, or is
// above one of them.
func pathMatch(paths []string, path string) bool {
	for _, p := range paths {
		if p == path || isPathPrefix(p, path) || isPathPrefix(path, p) {
			return true
		}
	}
	return false
}

func isPathPrefix(prefix, path string) bool {
	return strings.HasPrefix(path, prefix) && len(path) > len(prefix) && (path[len(prefix)] == '[' || path[len(prefix)] == '.')
}

// Variable is an input variable.
type Variable struct {
	Name        string
	Description string
	Type        cty.Type
	Default     cty.Value // cty.NilVal when the variable is required
	Sensitive   bool
	// Value is the resolved value (without sensitivity marks).
	Value cty.Value
	// Source says where Value came from: "default", "env", "-var" or the
	// variable file's name.
	Source    string
	DeclRange hcl.Range
}

// Local is a named value from a locals block.
type Local struct {
	Name      string
	Value     cty.Value // without sensitivity marks; may be unknown
	Sensitive bool      // derived from a sensitive value
	DeclRange hcl.Range
}

// Output is an output value.
type Output struct {
	Name        string
	Description string
	// Value is the evaluated value without sensitivity marks; it may be
	// (or contain) unknown values before facts are known.
	Value      cty.Value
	Sensitive  bool
	DeclRange  hcl.Range
	ValueRange hcl.Range
}

// Node is one SSH-reachable host. A node block with for_each yields one Node
// per key.
type Node struct {
	Decl
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

// Network is the fabric every layer of a Ray cluster must bind to.
type Network struct {
	Decl
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

// RayCluster is a Ray cluster: one container per node, a head and workers.
type RayCluster struct {
	Decl
	Name          string   `rayform:",name"`
	Image         string   `rayform:"image"`
	Head          string   `rayform:"head"`           // node name
	Workers       []string `rayform:"workers"`        // node names, in configuration order
	Network       string   `rayform:"network"`        // network name, "" when none (allowed for a single node)
	Port          int      `rayform:"port"`           // GCS port, default 6379
	DashboardPort int      `rayform:"dashboard_port"` // default 8265
	// MemoryMonitor is Ray's memory monitor (the OOM killer); false sets
	// RAY_memory_monitor_refresh_ms=0 in every container. Default true.
	MemoryMonitor bool `rayform:"memory_monitor"`
	// DataplaneCheck runs the data-plane check (torch c10d, Gloo and NCCL
	// across every node, resources/dataplane) before vllm serve starts.
	// Default true; false for images without Python and torch.
	DataplaneCheck bool              `rayform:"dataplane_check"`
	ShmSize        string            `rayform:"shm_size"` // docker --shm-size, "" = not set
	Env            map[string]string `rayform:"env"`
	Volumes        []string          `rayform:"volumes"`        // docker -v specs
	DockerArgs     []string          `rayform:"docker_args"`    // extra docker run arguments
	ContainerName  string            `rayform:"container_name"` // default "rayform-<name>"
	// HeadAddress is the head's observed fabric address; invalid until
	// observed.
	HeadAddress netip.Addr
}

// Nodes returns the head followed by the workers.
func (r *RayCluster) Nodes() []string {
	return append([]string{r.Head}, r.Workers...)
}

// Address returns "<head fabric ip>:<port>", and false before the head's
// address is observed.
func (r *RayCluster) Address() (string, bool) {
	if !r.HeadAddress.IsValid() {
		return "", false
	}
	return netip.AddrPortFrom(r.HeadAddress, uint16(r.Port)).String(), true
}

// VLLMServe is a `vllm serve` process on a Ray cluster's head.
type VLLMServe struct {
	Decl
	Name                 string            `rayform:",name"`
	Cluster              string            `rayform:"cluster"` // ray_cluster name
	Model                string            `rayform:"model"`
	ServedModelName      string            `rayform:"served_model_name"`      // default Model
	TensorParallelSize   int               `rayform:"tensor_parallel_size"`   // default 1
	PipelineParallelSize int               `rayform:"pipeline_parallel_size"` // default 1
	GPUMemoryUtilization float64           `rayform:"gpu_memory_utilization"`
	MaxModelLen          int               `rayform:"max_model_len"` // 0 = vLLM's default (the model's)
	Port                 int               `rayform:"port"`          // default 8000
	Env                  map[string]string `rayform:"env"`
	ExtraArgs            []string          `rayform:"extra_args"`
	// APIKey is the key vLLM requires on its /v1 routes, "" for none. It
	// reaches vLLM as VLLM_API_KEY in the environment, never in argv.
	APIKey       string        `rayform:"api_key"`
	ReadyTimeout time.Duration `rayform:"ready_timeout"` // default 30m
	// Endpoint is the OpenAI base URL, "" until the head's address is
	// observed.
	Endpoint string
	// PublicEndpoint is the same URL on the head node's host (its SSH
	// address as configured), known from the configuration alone.
	PublicEndpoint string
}
