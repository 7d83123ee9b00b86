package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Block types.
const (
	kindVariable = "variable"
	kindLocal    = "local"
	kindOutput   = "output"
	// kindSettings is the top-level `rayform { project = "NAME" }` block,
	// like Terraform's `terraform {}` settings block.
	kindSettings = "rayform"
)

// Arg is one argument of a block type, as data (see [Kind]). Decoding
// (types, defaults, ranges), the README's reference and the plan's
// attribute list (resources) all read it.
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
	// Ref is the block type an argument refers to ("node"): only the
	// referenced block's identity matters, so the rest of its object may
	// be unknown. It decodes to the block's name, or with Decoded
	// list(string) to the names of several nodes. Type is then
	// cty.DynamicPseudoType.
	Ref string
	// CycleSummary and CycleDetail, when set on a reference to the
	// block's own kind, describe a loop of references made through this
	// argument alone (nodes that jump through each other as bastions);
	// CycleDetail is a format that receives the loop ("a -> b -> a").
	CycleSummary, CycleDetail string
	// Decoded is the type of the decoded value (Decl.Args) when it is not
	// Type: the name or names a reference decodes to.
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
	Sensitive bool
	// Exposure names where the argument's value goes that a secret must
	// not (a command line, a container's name): a noun phrase completing
	// "the value of NAME reaches ..." in the error that refuses a
	// sensitive value. An argument that is neither MaySensitive nor
	// Sensitive refuses a value derived from a sensitive one, anywhere in
	// it; without Exposure the error names rayform's plans, messages and
	// commands.
	Exposure string
	// Description is the argument's one-line meaning, as the README's
	// reference shows it (Markdown).
	Description string
	// TypeDoc is the README's type when it is not Type's (a reference:
	// "node", "nodes"); DefaultDoc the README's default when it is not
	// Default (or "required", or "none"); ExportDoc a note on the
	// exported attribute ("node name").
	TypeDoc, DefaultDoc, ExportDoc string
}

// ValueType is the type of the argument's decoded value.
func (a Arg) ValueType() cty.Type {
	if a.Decoded != cty.NilType {
		return a.Decoded
	}
	return a.Type
}

// rootSchema is the top level of a configuration file: the language's
// blocks and one block type per registered kind.
func (m *module) rootSchema() *hcl.BodySchema {
	label := []string{"name"}
	s := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: kindSettings},
		{Type: kindVariable, LabelNames: label},
		{Type: "locals"},
		{Type: kindOutput, LabelNames: label},
	}}
	for _, t := range m.kindOrder {
		s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: t, LabelNames: label})
	}
	return s
}

// blockSchema is the body schema of a resource or output block.
func (m *module) blockSchema(kind string) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, a := range m.args(kind) {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: a.Name, Required: a.Required})
	}
	if k := m.kinds[kind]; k != nil && k.ForEach {
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
