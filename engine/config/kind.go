package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Kind describes a resource block type as data: its name, its arguments
// (types, defaults, ranges, documentation), the attributes rayform
// computes for it, and the checks of its values that are particular to it.
// The kinds a configuration may use are passed to [Load] in
// [Options.Kinds]; the resources package provides them (resources.Kinds).
// Blocks of any other type are "Unsupported block type" errors.
type Kind struct {
	// Type is the block type, e.g. "ray_cluster"; references to a block
	// start with it (ray_cluster.NAME).
	Type string
	// Noun is how diagnostics name the block type ("Ray cluster"); Type
	// when "".
	Noun string
	// Summary is what a block of this type is, for the README's heading.
	Summary string
	// ForEach allows the for_each argument: one instance per key.
	ForEach bool
	// Args are the block's arguments, in the order they are evaluated,
	// documented and shown in plans.
	Args []Arg
	// Computed lists, in order, the attributes of the block's value in
	// expressions that are not arguments (address, endpoint, ...).
	Computed []Attr
	// Check checks a decoded block's values on their own (after every
	// argument is decoded), reporting through b; nil for none.
	Check func(b *Block)
	// Validate checks the rules that involve other blocks, once every
	// block is evaluated (before the second pass that learns the
	// networks' nodes), reporting errors through report; nil for none.
	Validate func(cfg *Config, report Report)
}

// Report reports an error at argument attr of the block declared by d
// (at its header when attr is not set).
type Report func(d *Decl, attr, summary, detail string)

// Attr is an attribute rayform computes for a block, as expressions see
// it.
type Attr struct {
	Name string
	// Doc says what it holds, for the README.
	Doc string
}

// noun is how diagnostics name the kind.
func (k *Kind) noun() string {
	if k.Noun != "" {
		return k.Noun
	}
	return k.Type
}

// Exports lists, in order, the attributes of a block's value in
// expressions: id, name, key (for_each kinds), the exported arguments and
// the computed attributes.
func (k *Kind) Exports() []string {
	out := []string{"id", "name"}
	if k.ForEach {
		out = append(out, "key")
	}
	for _, a := range k.Args {
		if a.Exported {
			out = append(out, a.Name)
		}
	}
	for _, a := range k.Computed {
		out = append(out, a.Name)
	}
	return out
}

// Block is one evaluated block instance as its kind's [Kind.Check] sees
// it: the decoded value, and where to report problems.
type Block struct {
	b     *blockEval
	value any
}

// Value is the decoded block: *Node, *Network, *RayCluster or *VLLMServe
// for the kinds this package decodes into Go values. Its Decl is not yet
// filled in; use [Block.Decl].
func (b *Block) Value() any { return b.value }

// Decl is the block's declaration: its ranges, decoded Args, sensitive and
// unknown paths.
func (b *Block) Decl() *Decl { return b.b.decl }

// IsSet reports whether argument attr is set to a known, non-null value.
func (b *Block) IsSet(attr string) bool {
	_, ok := b.b.raw[attr]
	return ok
}

// Failed reports whether an error was already reported within attr's
// expression, so that a check does not pile onto it.
func (b *Block) Failed(attr string) bool { return b.b.failed(attr) }

// Error reports an error at argument attr (the block header when unset).
func (b *Block) Error(attr, summary, detail string) { b.b.errorAt(attr, summary, detail) }

// Warn reports a warning at argument attr.
func (b *Block) Warn(attr, summary, detail string) { b.b.warnAt(attr, summary, detail) }

// check runs the kind's Check on a decoded block.
func (b *blockEval) check(value any) {
	if k := b.e.mod.kinds[b.it.kind]; k != nil && k.Check != nil {
		k.Check(&Block{b: b, value: value})
	}
}

// registerKinds indexes the kinds of opts, in order; a duplicate or a
// reserved type is an error.
func registerKinds(kinds []Kind) (map[string]*Kind, []string, hcl.Diagnostics) {
	byType := map[string]*Kind{}
	var order []string
	for i := range kinds {
		k := &kinds[i]
		switch _, dup := byType[k.Type]; {
		case k.Type == "" || dup || reservedType(k.Type):
			return nil, nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Invalid resource kinds",
				Detail:   fmt.Sprintf("The block type %q is empty, reserved or registered twice.", k.Type),
			}}
		}
		byType[k.Type] = k
		order = append(order, k.Type)
	}
	if len(order) == 0 {
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "No resource kinds",
			Detail:   "The configuration was loaded without resource kinds; pass Options.Kinds (resources.Kinds()).",
		}}
	}
	return byType, order, nil
}

// reservedType reports whether a block type belongs to the language.
func reservedType(t string) bool {
	switch t {
	case kindVariable, kindLocal, kindOutput, kindSettings, "locals", "var", "each":
		return true
	}
	return false
}

// args returns the arguments of a block type: an output's, or a registered
// kind's.
func (m *module) args(kind string) []Arg {
	if kind == kindOutput {
		return outputArgs()
	}
	if k := m.kinds[kind]; k != nil {
		return k.Args
	}
	return nil
}

// noun is how diagnostics name a block type.
func (m *module) noun(kind string) string {
	switch kind {
	case kindVariable:
		return "input variable"
	case kindLocal:
		return "local value"
	}
	if k := m.kinds[kind]; k != nil {
		return k.noun()
	}
	return kind
}

// exportAttrs lists the attributes of a block's value in expressions, or
// nil for variables and locals (whose values are arbitrary).
func (m *module) exportAttrs(kind string) []string {
	if k := m.kinds[kind]; k != nil {
		return k.Exports()
	}
	return nil
}

// refRoot maps a reference's first name to the block type it refers to.
func (m *module) refRoot(root string) (string, bool) {
	switch root {
	case "var":
		return kindVariable, true
	case "local":
		return kindLocal, true
	}
	if _, ok := m.kinds[root]; ok {
		return root, true
	}
	return "", false
}

// roots are the names a reference may start with, for suggestions.
func (m *module) roots() []string {
	out := []string{"var", "local"}
	out = append(out, m.kindOrder...)
	return append(out, "each")
}

// refForms lists the forms of references, "var.NAME, local.NAME, ... or
// vllm_serve.NAME", for messages.
func (m *module) refForms() string {
	forms := []string{"var.NAME", "local.NAME"}
	for _, t := range m.kindOrder {
		forms = append(forms, t+".NAME")
	}
	return strings.Join(forms[:len(forms)-1], ", ") + " or " + forms[len(forms)-1]
}

// outputArgs are the arguments of an output block.
func outputArgs() []Arg {
	return []Arg{
		{Name: "value", Type: cty.DynamicPseudoType, Required: true, UnknownOK: true},
		{Name: "description", Type: cty.String},
		{Name: "sensitive", Type: cty.Bool},
	}
}
