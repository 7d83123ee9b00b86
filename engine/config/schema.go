package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Block types.
const (
	kindVariable   = "variable"
	kindLocal      = "local"
	kindOutput     = "output"
	kindNode       = "node"
	kindNetwork    = "network"
	kindRayCluster = "ray_cluster"
	kindVLLMServe  = "vllm_serve"
	// kindSettings is the top-level `rayform { project = "NAME" }` block,
	// like Terraform's `terraform {}` settings block.
	kindSettings = "rayform"
)

// Arg is one argument of a block type, as data. Decoding (types, defaults,
// ranges), the README's reference (see readme_test.go) and the plan's
// attribute list (resources) all read it from [Schema].
type Arg struct {
	Name string
	// Type is what the expression must convert to; cty.DynamicPseudoType
	// when the decoder checks the shape itself.
	Type     cty.Type
	Required bool
	// Default is the value an unset argument takes; cty.NilVal when it
	// has none (null) or when it is computed from other arguments.
	Default cty.Value
	// Min and Max bound a number when Max > 0.
	Min, Max float64
	// UnknownOK allows values known only after observing the hosts.
	UnknownOK bool
	// Ref marks a reference to another block; only the block's identity
	// matters, so the rest of the referenced object may be unknown. It
	// decodes to the block's name (Decoded is its type).
	Ref bool
	// Decoded is the type of the decoded value (Decl.Args) when it is not
	// Type: the names a reference decodes to.
	Decoded cty.Type
	// Exported arguments can be referred to as BLOCK.NAME.ARG.
	Exported bool
	// Applied arguments are applied to the hosts: a plan shows their
	// changes. The others only steer rayform (ready_timeout) or are
	// checked, not applied (a node's gpus, a network's mtu).
	Applied bool
	// ForcesReplacement: changing an applied argument replaces the
	// resource (restarts its process).
	ForcesReplacement bool
	// MaySensitive: the value may hold values of sensitive variables,
	// which plans mask element by element.
	MaySensitive bool
	// Sensitive: the value is always masked, whatever it comes from.
	Sensitive   bool
	Description string
}

// ValueType is the type of the argument's decoded value.
func (a Arg) ValueType() cty.Type {
	if a.Decoded != cty.NilType {
		return a.Decoded
	}
	return a.Type
}

// Schema returns the arguments of a block type, in the order they are
// evaluated, documented and shown in plans.
func Schema(kind string) []Arg { return kindSpecs(kind) }

// kindSpecs returns the arguments of a resource block type, in the order
// they are evaluated and documented.
func kindSpecs(kind string) []Arg {
	str, num, dyn, boolean := cty.String, cty.Number, cty.DynamicPseudoType, cty.Bool
	strList, strMap := cty.List(cty.String), cty.Map(cty.String)
	port := func(def int64) (cty.Value, float64, float64) { return cty.NumberIntVal(def), 1, 65535 }
	switch kind {
	case kindNode:
		return []Arg{
			{Name: "host", Type: str, Required: true, Exported: true, Description: "SSH address or ~/.ssh/config alias"},
			{Name: "user", Type: str, Exported: true, Description: "SSH user (default: ~/.ssh/config, then the local user)"},
			{Name: "port", Type: num, Min: 1, Max: 65535, Exported: true, Description: "SSH port (default: ~/.ssh/config, then 22)"},
			{Name: "identity_file", Type: str, Description: "SSH private key (default: the agent and ~/.ssh/config)"},
			{Name: "bastion", Type: dyn, Ref: true, Decoded: str, Description: "a node to jump through"},
			{Name: "gpus", Type: num, Default: cty.NumberIntVal(0), Min: 0, Max: 1 << 20, Exported: true, Description: "GPUs the node must have"},
			{Name: "labels", Type: strMap, Exported: true, Description: "free-form labels"},
			{Name: "fabric_interface", Type: str, Exported: true, Description: "this node's interface on its network"},
		}
	case kindNetwork:
		return []Arg{
			{Name: "cidr", Type: str, Required: true, Exported: true, Description: "the fabric's subnet"},
			{Name: "interface", Type: dyn, Exported: true, Description: "the fabric interface, or a map of it by node"},
			{Name: "ib_hca", Type: strList, Exported: true, Description: "InfiniBand HCAs for NCCL_IB_HCA"},
			{Name: "mtu", Type: num, Min: 68, Max: 65535, Exported: true, Description: "the fabric links' MTU, checked"},
		}
	case kindRayCluster:
		pDef, pMin, pMax := port(6379)
		dDef, dMin, dMax := port(8265)
		return []Arg{
			{Name: "image", Type: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true, Description: "the container image every node runs"},
			{Name: "head", Type: dyn, Ref: true, Decoded: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true, Description: "the node running Ray's head"},
			{Name: "workers", Type: dyn, Ref: true, Decoded: strList, Exported: true, Applied: true, Description: "the nodes joining the head"},
			{Name: "network", Type: dyn, Ref: true, Decoded: str, Exported: true, Applied: true, ForcesReplacement: true, Description: "the network the cluster binds to"},
			{Name: "port", Type: num, Default: pDef, Min: pMin, Max: pMax, Exported: true, Applied: true, ForcesReplacement: true, Description: "Ray's GCS port"},
			{Name: "dashboard_port", Type: num, Default: dDef, Min: dMin, Max: dMax, Exported: true, Applied: true, ForcesReplacement: true, Description: "Ray's dashboard port"},
			{Name: "memory_monitor", Type: boolean, Default: cty.True, Applied: true, ForcesReplacement: true, Description: "Ray's memory monitor (false sets RAY_memory_monitor_refresh_ms=0)"},
			{Name: "dataplane_check", Type: boolean, Default: cty.True, Description: "after apply, check the data plane (c10d, Gloo, NCCL) between the nodes"},
			{Name: "shm_size", Type: str, Description: "ignored: the containers share the host's /dev/shm (--ipc host)"},
			{Name: "env", Type: strMap, UnknownOK: true, Applied: true, ForcesReplacement: true, MaySensitive: true, Description: "the containers' environment"},
			{Name: "volumes", Type: strList, UnknownOK: true, Applied: true, ForcesReplacement: true, MaySensitive: true, Description: "docker -v mounts"},
			{Name: "docker_args", Type: strList, UnknownOK: true, Applied: true, ForcesReplacement: true, MaySensitive: true, Description: "extra docker run arguments"},
			{Name: "container_name", Type: str, Exported: true, Applied: true, ForcesReplacement: true, Description: "the containers' name (default rayform-NAME)"},
		}
	case kindVLLMServe:
		pDef, pMin, pMax := port(8000)
		return []Arg{
			{Name: "cluster", Type: dyn, Ref: true, Decoded: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true, Description: "the Ray cluster whose head runs the serve"},
			{Name: "model", Type: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true, Description: "the model vLLM loads"},
			{Name: "served_model_name", Type: str, Exported: true, Applied: true, ForcesReplacement: true, Description: "the model's name in the API (default: model)"},
			{Name: "tensor_parallel_size", Type: num, Default: cty.NumberIntVal(1), Min: 1, Max: 1 << 20, Exported: true, Applied: true, ForcesReplacement: true, Description: "GPUs per pipeline stage"},
			{Name: "pipeline_parallel_size", Type: num, Default: cty.NumberIntVal(1), Min: 1, Max: 1 << 20, Exported: true, Applied: true, ForcesReplacement: true, Description: "pipeline stages"},
			{Name: "gpu_memory_utilization", Type: num, Default: cty.NumberFloatVal(0.9), Applied: true, ForcesReplacement: true, Description: "share of each GPU's memory vLLM takes"},
			{Name: "max_model_len", Type: num, Min: 1, Max: 1 << 40, Applied: true, ForcesReplacement: true, Description: "the context length (default: the model's)"},
			{Name: "port", Type: num, Default: pDef, Min: pMin, Max: pMax, Exported: true, Applied: true, ForcesReplacement: true, Description: "the OpenAI API port"},
			{Name: "env", Type: strMap, UnknownOK: true, Applied: true, ForcesReplacement: true, MaySensitive: true, Description: "the serve process's environment"},
			{Name: "extra_args", Type: strList, UnknownOK: true, Applied: true, ForcesReplacement: true, MaySensitive: true, Description: "more vllm serve arguments"},
			{Name: "api_key", Type: str, Applied: true, ForcesReplacement: true, Sensitive: true, Description: "the key clients must send (VLLM_API_KEY); always masked"},
			{Name: "ready_timeout", Type: str, Default: cty.StringVal("30m"), Description: "how long apply waits for the serve to answer"},
		}
	case kindOutput:
		return []Arg{
			{Name: "value", Type: dyn, Required: true, UnknownOK: true},
			{Name: "description", Type: str},
			{Name: "sensitive", Type: boolean},
		}
	}
	return nil
}

// rootSchema is the top level of a configuration file.
func rootSchema() *hcl.BodySchema {
	label := []string{"name"}
	return &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: kindSettings},
		{Type: kindVariable, LabelNames: label},
		{Type: "locals"},
		{Type: kindOutput, LabelNames: label},
		{Type: kindNode, LabelNames: label},
		{Type: kindNetwork, LabelNames: label},
		{Type: kindRayCluster, LabelNames: label},
		{Type: kindVLLMServe, LabelNames: label},
	}}
}

// blockSchema is the body schema of a resource or output block.
func blockSchema(kind string) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, a := range kindSpecs(kind) {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: a.Name, Required: a.Required})
	}
	if kind == kindNode {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: "for_each"})
	}
	return s
}

// settingsSchema is the body of the `rayform` block.
func settingsSchema() *hcl.BodySchema {
	return &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "project"}}}
}

func variableSchema() *hcl.BodySchema {
	return &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "type"},
			{Name: "default"},
			{Name: "description"},
			{Name: "sensitive"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
	}
}

func validationSchema() *hcl.BodySchema {
	return &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	}}
}

// kindNoun is how diagnostics name a block type.
func kindNoun(kind string) string {
	switch kind {
	case kindVariable:
		return "input variable"
	case kindLocal:
		return "local value"
	case kindRayCluster:
		return "Ray cluster"
	case kindVLLMServe:
		return "vllm_serve"
	}
	return kind
}

// refRoot maps a reference's first name to the block type it refers to.
func refRoot(root string) (string, bool) {
	switch root {
	case "var":
		return kindVariable, true
	case "local":
		return kindLocal, true
	case kindNode, kindNetwork, kindRayCluster, kindVLLMServe:
		return root, true
	}
	return "", false
}

// addrPrefix is the first part of a block-level address of kind.
func addrPrefix(kind string) string {
	switch kind {
	case kindVariable:
		return "var"
	case kindLocal:
		return "local"
	}
	return kind
}
