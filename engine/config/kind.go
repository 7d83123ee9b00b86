package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Kind describes a resource block type as data: its name, its arguments
// (types, defaults, ranges, documentation), the attributes rayform
// computes for it, and the checks of its values that are particular to it.
// The kinds a configuration may use are passed to [Load] in
// [Options.Kinds]; the registry provides them (resources.Kinds().Schemas()).
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
	// New returns a pointer to a new, zero value of the kind's Go type: a
	// struct embedding [Decl] whose fields tagged `rayform:"ARG"` receive
	// the decoded arguments (see [Block] for the types a tag decodes
	// into), and whose fields tagged `rayform:",name"`, `rayform:",label"`
	// and `rayform:",key"` receive the instance's name, its block label
	// and its for_each key. The value is what [Config.Blocks] holds.
	New func() any
	// Decode completes a decoded value with what its tags cannot express
	// (values parsed from strings, defaults computed from other arguments:
	// see [Block.SetDefault]), reporting through b; nil for none. It runs
	// after the tags are decoded and before Check.
	Decode func(b *Block)
	// Check checks a decoded block's values on their own (after every
	// argument is decoded), reporting through b; nil for none.
	Check func(b *Block)
	// Compute returns the value of each attribute of Computed as
	// expressions see it (unknown while it depends on facts not yet
	// observed), and may fill the Go value's computed fields. It runs once
	// the block decoded and checked without errors; nil when Computed is
	// empty.
	Compute func(b *Block) map[string]cty.Value
	// Validate checks the rules that involve other blocks on the result
	// of the evaluation's first pass, before the second ([Block.Prior]),
	// reporting errors through report; nil for none.
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
	// From are the block's own arguments it is derived from (with what
	// observing the hosts teaches): an output that reads it changes only
	// when one of them does. Empty when it is not known.
	From []string
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

// Block is one evaluated block instance as its kind's hooks ([Kind.Decode],
// [Kind.Check], [Kind.Compute]) see it: the decoded value, the
// configuration evaluated so far, and where to report problems.
//
// A field tagged `rayform:"ARG"` decodes the argument's value (default
// applied, references as the names they resolve to) into a string, bool,
// int, float64, time.Duration (from a duration string such as "20m"),
// []string or map[string]string; an unset argument without a default
// leaves the field's zero value, and so does a value known only after
// observing the hosts.
type Block struct {
	b     *blockEval
	value any
}

// Value is the decoded block: a pointer to the kind's Go value
// ([Kind.New]). Its Decl is filled in once the hooks ran; use
// [Block.Decl] meanwhile.
func (b *Block) Value() any { return b.value }

// Name is the instance's name: its label, or label["key"] for a for_each
// instance.
func (b *Block) Name() string { return b.b.name }

// Decl is the block's declaration: its ranges, decoded Args, sensitive and
// unknown paths.
func (b *Block) Decl() *Decl { return b.b.decl }

// Config is the configuration evaluated so far: every block this one
// depends on is in it.
func (b *Block) Config() *Config { return b.b.e.cfg }

// Prior is the configuration of the evaluation's first pass, in which
// every block is evaluated once without knowing the others that come
// after it (a network does not know the clusters on it); nil during the
// first pass. The second pass is the one whose result [Load] returns.
func (b *Block) Prior() *Config { return b.b.e.prior }

// Facts are the observed facts the configuration is evaluated with, as
// the caller passed them to [Config.WithFacts]; nil before any.
func (b *Block) Facts() any { return b.b.e.facts }

// IsSet reports whether argument attr is set to a known, non-null value.
func (b *Block) IsSet(attr string) bool {
	_, ok := b.b.raw[attr]
	return ok
}

// Known returns argument attr's value without sensitivity marks when it is
// set and known: for arguments whose type the kind checks itself
// (cty.DynamicPseudoType).
func (b *Block) Known(attr string) (cty.Value, bool) { return b.b.known(attr) }

// IsComputed reports whether attr's expression builds its value (a for
// expression or a function call) rather than writing it out.
func (b *Block) IsComputed(attr string) bool { return b.b.computed(attr) }

// SetDefault sets the decoded value of argument attr when it is not set: a
// default computed from other arguments ("rayform-NAME"). The value
// expressions see is v too.
func (b *Block) SetDefault(attr string, v cty.Value) {
	if _, ok := b.b.vals[attr]; ok {
		return
	}
	b.b.record(attr, v)
}

// SetDefaultFrom sets the value of argument attr, when it is not set, to
// argument from's, marks included (served_model_name defaults to model).
func (b *Block) SetDefaultFrom(attr, from string) {
	if _, ok := b.b.vals[attr]; ok {
		return
	}
	b.b.record(attr, b.b.decl.Args[from])
	if v, ok := b.b.vals[from]; ok {
		b.b.defaults[attr] = v
	}
	for _, p := range b.b.decl.Sensitive {
		if rest, ok := strings.CutPrefix(p, from); ok && (rest == "" || rest[0] == '[' || rest[0] == '.') {
			b.b.decl.Sensitive = append(b.b.decl.Sensitive, attr+rest)
		}
	}
	sort.Strings(b.b.decl.Sensitive)
}

// Failed reports whether an error was already reported within attr's
// expression, so that a check does not pile onto it.
func (b *Block) Failed(attr string) bool { return b.b.failed(attr) }

// Error reports an error at argument attr (the block header when unset).
func (b *Block) Error(attr, summary, detail string) { b.b.errorAt(attr, summary, detail) }

// Warn reports a warning at argument attr.
func (b *Block) Warn(attr, summary, detail string) { b.b.warnAt(attr, summary, detail) }

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
		case !validNew(k.New):
			return nil, nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Invalid resource kinds",
				Detail:   fmt.Sprintf("The kind %q has no Go type: its New must return a pointer to a struct that embeds config.Decl.", k.Type),
			}}
		}
		byType[k.Type] = k
		order = append(order, k.Type)
	}
	if len(order) == 0 {
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "No resource kinds",
			Detail:   "The configuration was loaded without resource kinds; pass Options.Kinds (resources.Kinds().Schemas()).",
		}}
	}
	return byType, order, nil
}

// validNew reports whether a kind's New returns a pointer to a struct
// embedding Decl.
func validNew(newValue func() any) bool {
	if newValue == nil {
		return false
	}
	v := newValue()
	_, ok := v.(Declarer)
	return ok && reflect.TypeOf(v).Kind() == reflect.Pointer && reflect.TypeOf(v).Elem().Kind() == reflect.Struct
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

// arg returns argument attr of a block type, or nil.
func (m *module) arg(kind, attr string) *Arg {
	args := m.args(kind)
	for i := range args {
		if args[i].Name == attr {
			return &args[i]
		}
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
		{Name: "value", Type: cty.DynamicPseudoType, Required: true, UnknownOK: true, MaySensitive: true},
		{Name: "description", Type: cty.String},
		{Name: "sensitive", Type: cty.Bool},
	}
}
