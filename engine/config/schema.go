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

// attrSpec describes one argument of a block.
type attrSpec struct {
	name     string
	typ      cty.Type // cty.DynamicPseudoType when the decoder checks the shape itself
	required bool
	// unknownOK allows values known only after observing the hosts.
	unknownOK bool
	// ref marks a reference to another block; only the block's identity
	// matters, so the rest of the referenced object may be unknown.
	ref bool
}

// kindSpecs returns the arguments of a resource block type, in the order
// they are evaluated and documented.
func kindSpecs(kind string) []attrSpec {
	str, num, dyn := cty.String, cty.Number, cty.DynamicPseudoType
	strList, strMap := cty.List(cty.String), cty.Map(cty.String)
	switch kind {
	case kindNode:
		return []attrSpec{
			{name: "host", typ: str, required: true},
			{name: "user", typ: str},
			{name: "port", typ: num},
			{name: "identity_file", typ: str},
			{name: "bastion", typ: dyn, ref: true},
			{name: "gpus", typ: num},
			{name: "labels", typ: strMap},
			{name: "fabric_interface", typ: str},
		}
	case kindNetwork:
		return []attrSpec{
			{name: "cidr", typ: str, required: true},
			{name: "interface", typ: dyn},
			{name: "ib_hca", typ: strList},
			{name: "mtu", typ: num},
		}
	case kindRayCluster:
		return []attrSpec{
			{name: "image", typ: str, required: true},
			{name: "head", typ: dyn, ref: true, required: true},
			{name: "workers", typ: dyn, ref: true},
			{name: "network", typ: dyn, ref: true},
			{name: "port", typ: num},
			{name: "dashboard_port", typ: num},
			{name: "memory_monitor", typ: cty.Bool},
			{name: "dataplane_check", typ: cty.Bool},
			{name: "shm_size", typ: str},
			{name: "env", typ: strMap, unknownOK: true},
			{name: "volumes", typ: strList, unknownOK: true},
			{name: "docker_args", typ: strList, unknownOK: true},
			{name: "container_name", typ: str},
		}
	case kindVLLMServe:
		return []attrSpec{
			{name: "cluster", typ: dyn, ref: true, required: true},
			{name: "model", typ: str, required: true},
			{name: "served_model_name", typ: str},
			{name: "tensor_parallel_size", typ: num},
			{name: "pipeline_parallel_size", typ: num},
			{name: "gpu_memory_utilization", typ: num},
			{name: "max_model_len", typ: num},
			{name: "port", typ: num},
			{name: "env", typ: strMap, unknownOK: true},
			{name: "extra_args", typ: strList, unknownOK: true},
			{name: "api_key", typ: str},
			{name: "ready_timeout", typ: str},
		}
	case kindOutput:
		return []attrSpec{
			{name: "value", typ: dyn, required: true, unknownOK: true},
			{name: "description", typ: str},
			{name: "sensitive", typ: cty.Bool},
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
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: a.name, Required: a.required})
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
