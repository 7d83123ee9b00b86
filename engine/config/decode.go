package config

import (
	"fmt"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/hashicorp/hcl/v2"
)

// errorAt adds an error pointing at argument attr (or the block header when
// the argument is not set).
func (b *blockEval) errorAt(attr, summary, detail string) {
	rng := b.decl.Range(attr)
	b.diags = append(b.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  &rng,
	})
}

// warnAt reports a warning at attr.
func (b *blockEval) warnAt(attr, summary, detail string) {
	rng := b.decl.Range(attr)
	b.diags = append(b.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: detail, Subject: &rng})
}

// failed reports whether an error was already reported within attr's
// expression, so a check of its absence does not pile onto that error.
func (b *blockEval) failed(attr string) bool {
	r, ok := b.decl.AttrRanges[attr]
	if !ok {
		return false
	}
	for _, d := range b.diags {
		if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Filename == r.Filename && r.ContainsOffset(d.Subject.Start.Byte) {
			return true
		}
	}
	return false
}

// known returns the unmarked value of attr when it is set and known.
func (b *blockEval) known(attr string) (cty.Value, bool) {
	v, ok := b.raw[attr]
	if !ok || !v.IsKnown() {
		return cty.NilVal, false
	}
	return v, true
}

// spec is attr's entry in the block type's schema.
func (b *blockEval) spec(attr string) Arg {
	for _, a := range b.e.mod.args(b.it.kind) {
		if a.Name == attr {
			return a
		}
	}
	return Arg{Name: attr}
}

// record keeps attr's decoded value (default applied, references as
// names) in Decl.Args.
func (b *blockEval) record(attr string, v cty.Value) {
	if b.decl.Args == nil {
		b.decl.Args = map[string]cty.Value{}
	}
	b.decl.Args[attr] = v
}

// decodeRest decodes, by their schema type, the arguments the block's own
// code did not, so that every argument's value (default applied, range
// checked) is in Decl.Args: code that needs a new argument reads it there.
func (b *blockEval) decodeRest() {
	for _, a := range b.e.mod.args(b.it.kind) {
		if _, done := b.decl.Args[a.Name]; done {
			continue
		}
		switch t := a.Type; {
		case a.Ref == kindNode && a.ValueType().IsListType():
			b.nodeRefs(a.Name)
		case a.Ref == kindNode:
			b.nodeRef(a.Name)
		case a.Ref != "":
			b.blockRef(a.Name, a.Ref)
		case t == cty.String:
			b.str(a.Name)
		case t == cty.Bool:
			b.boolean(a.Name)
		case t == cty.Number && (a.Max > 0 || a.Default != cty.NilVal && a.Default.AsBigFloat().IsInt()):
			b.integer(a.Name)
		case t == cty.Number:
			b.float(a.Name)
		case t.Equals(cty.List(cty.String)):
			b.strList(a.Name)
		case t.Equals(cty.Map(cty.String)):
			b.strMap(a.Name)
		}
	}
}

// str decodes a string, or the schema's default.
func (b *blockEval) str(attr string) string {
	def := ""
	if d := b.spec(attr).Default; d != cty.NilVal {
		def = d.AsString()
	}
	return b.strOr(attr, def)
}

// strOr decodes a string, or def (a default computed from other values).
func (b *blockEval) strOr(attr, def string) string {
	s := def
	if v, ok := b.known(attr); ok {
		s = v.AsString()
	}
	if s == "" {
		b.record(attr, cty.NullVal(cty.String))
	} else {
		b.record(attr, cty.StringVal(s))
	}
	return s
}

// boolean decodes a bool, or the schema's default (false without one).
func (b *blockEval) boolean(attr string) bool {
	v, ok := b.known(attr)
	if !ok {
		v = b.spec(attr).Default
		if v == cty.NilVal {
			v = cty.False
		}
	}
	b.record(attr, v)
	return v.True()
}

// float decodes a number, or the schema's default (0 without one).
func (b *blockEval) float(attr string) float64 {
	v, ok := b.known(attr)
	if !ok {
		v = b.spec(attr).Default
		if v == cty.NilVal {
			b.record(attr, cty.NullVal(cty.Number))
			return 0
		}
	}
	b.record(attr, v)
	f, _ := v.AsBigFloat().Float64()
	return f
}

// integer decodes a whole number within the schema's range, or the
// schema's default (0 without one).
func (b *blockEval) integer(attr string) int {
	spec := b.spec(attr)
	def := 0
	if spec.Default != cty.NilVal {
		d, _ := spec.Default.AsBigFloat().Int64()
		def = int(d)
	}
	defVal := func() int {
		if spec.Default == cty.NilVal {
			b.record(attr, cty.NullVal(cty.Number))
		} else {
			b.record(attr, spec.Default)
		}
		return def
	}
	v, ok := b.known(attr)
	if !ok {
		return defVal()
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		b.errorAt(attr, "Invalid whole number", fmt.Sprintf("%s must be a whole number; got %s.", attr, bf.Text('f', -1)))
		return defVal()
	}
	if spec.Max > 0 && (bf.Cmp(big.NewFloat(spec.Min)) < 0 || bf.Cmp(big.NewFloat(spec.Max)) > 0) {
		b.errorAt(attr, "Value out of range", fmt.Sprintf("%s must be between %d and %d; got %s.", attr, int64(spec.Min), int64(spec.Max), bf.Text('f', -1)))
		return defVal()
	}
	n, _ := bf.Int64()
	b.record(attr, cty.NumberIntVal(n))
	return int(n)
}

func (b *blockEval) strList(attr string) []string {
	v, ok := b.known(attr)
	if !ok {
		b.record(attr, cty.NullVal(cty.List(cty.String)))
		return nil
	}
	b.record(attr, v)
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsKnown() && !e.IsNull() {
			out = append(out, e.AsString())
		} else {
			out = append(out, "")
		}
	}
	return out
}

func (b *blockEval) strMap(attr string) map[string]string {
	v, ok := b.known(attr)
	if !ok {
		b.record(attr, cty.NullVal(cty.Map(cty.String)))
		return nil
	}
	b.record(attr, v)
	out := make(map[string]string, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsKnown() && !e.IsNull() {
			out[k.AsString()] = e.AsString()
		} else {
			out[k.AsString()] = ""
		}
	}
	return out
}

// duration decodes a duration, or the schema's default.
func (b *blockEval) duration(attr string) time.Duration {
	s := b.str(attr)
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		why := "it must be longer than zero"
		if err != nil {
			why = strings.TrimPrefix(err.Error(), "time: ")
		}
		b.errorAt(attr, "Invalid duration", fmt.Sprintf("%s must be a duration such as \"90s\", \"20m\" or \"1h30m\"; %q is not valid: %s.", attr, s, why))
		return 0
	}
	return d
}

// export returns attr's value with its marks, or a null of type ty.
func (b *blockEval) export(attr string, ty cty.Type) cty.Value {
	if v, ok := b.vals[attr]; ok {
		return v
	}
	return cty.NullVal(ty)
}

// object is the block's value as expressions see it: attrs (what the
// kind's decoder computes) and every exported argument of the schema that
// attrs lacks, as set (with its marks) or as decoded (its default, or the
// names a reference resolves to).
func (b *blockEval) object(attrs map[string]cty.Value) cty.Value {
	for _, a := range b.e.mod.args(b.it.kind) {
		if _, ok := attrs[a.Name]; ok || !a.Exported {
			continue
		}
		v, ok := b.vals[a.Name]
		if !ok || a.Ref != "" {
			v, ok = b.decl.Args[a.Name]
		}
		if !ok {
			v = cty.NullVal(a.ValueType())
		}
		attrs[a.Name] = v
	}
	return cty.ObjectVal(attrs)
}

// exportOr returns attr's value with its marks, or def.
func (b *blockEval) exportOr(attr string, def cty.Value) cty.Value {
	if v, ok := b.vals[attr]; ok {
		return v
	}
	return def
}

// refTarget recognises the value of a block reference (an object with an
// id like "node.spark1") and returns the block's type and name.
func refTarget(v cty.Value) (kind, name string, ok bool) {
	if !v.IsKnown() || v.IsNull() || !v.Type().IsObjectType() || !v.Type().HasAttribute("id") {
		return "", "", false
	}
	id := v.GetAttr("id")
	if !id.IsKnown() || id.IsNull() || id.Type() != cty.String {
		return "", "", false
	}
	kind, name, ok = strings.Cut(id.AsString(), ".")
	return kind, name, ok
}

// nodeRef decodes an argument that refers to one node, returning its name.
func (b *blockEval) nodeRef(attr string) string {
	name := b.nodeRefName(attr)
	b.record(attr, optStr(name))
	return name
}

func optStr(s string) cty.Value {
	if s == "" {
		return cty.NullVal(cty.String)
	}
	return cty.StringVal(s)
}

func (b *blockEval) nodeRefName(attr string) string {
	v, ok := b.known(attr)
	if !ok {
		return ""
	}
	if kind, name, ok := refTarget(v); ok && kind == kindNode {
		if _, exists := b.e.cfg.Nodes[name]; exists {
			return name
		}
	}
	b.badRef(attr, v, kindNode, fmt.Sprintf("%s = node.NAME", attr))
	return ""
}

// nodeRefs decodes an argument that refers to any number of nodes: a list,
// set or tuple of nodes, or a for_each node block (all its instances).
func (b *blockEval) nodeRefs(attr string) []string {
	names := b.nodeRefNames(attr)
	if len(names) == 0 {
		b.record(attr, cty.NullVal(cty.List(cty.String)))
		return names
	}
	vs := make([]cty.Value, len(names))
	for i, n := range names {
		vs[i] = cty.StringVal(n)
	}
	b.record(attr, cty.ListVal(vs))
	return names
}

func (b *blockEval) nodeRefNames(attr string) []string {
	v, ok := b.known(attr)
	if !ok {
		return nil
	}
	ty := v.Type()
	if !(ty.IsListType() || ty.IsSetType() || ty.IsTupleType() || ty.IsMapType() || (ty.IsObjectType() && !ty.HasAttribute("id"))) {
		b.badRef(attr, v, kindNode, fmt.Sprintf("%s = [node.a, node.b]", attr))
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		kind, name, ok := refTarget(e)
		if ok && kind == kindNode {
			if _, exists := b.e.cfg.Nodes[name]; exists {
				out = append(out, name)
				continue
			}
		}
		b.badRef(attr, e, kindNode, fmt.Sprintf("%s = [node.a, node.b]", attr))
		return nil
	}
	return out
}

// blockRef decodes an argument that refers to one block of kind.
func (b *blockEval) blockRef(attr, kind string) string {
	name := b.blockRefName(attr, kind)
	b.record(attr, optStr(name))
	return name
}

func (b *blockEval) blockRefName(attr, kind string) string {
	v, ok := b.known(attr)
	if !ok {
		return ""
	}
	if k, name, ok := refTarget(v); ok && k == kind {
		return name
	}
	b.badRef(attr, v, kind, fmt.Sprintf("%s = %s.NAME", attr, kind))
	return ""
}

// badRef reports an argument whose value is not a reference to a block of
// kind, explaining what it is instead.
func (b *blockEval) badRef(attr string, v cty.Value, kind, example string) {
	what := "a " + v.Type().FriendlyName()
	hint := ""
	switch k, name, ok := refTarget(v); {
	case ok:
		what = fmt.Sprintf("%s.%s", k, name)
	case v.Type() == cty.String:
		what = fmt.Sprintf("the string %q", v.AsString())
		s := v.AsString()
		if kind == kindNode {
			if _, exists := b.e.cfg.Nodes[s]; exists {
				hint = fmt.Sprintf(" Did you mean node.%s (without quotes)?", s)
			}
		} else if _, exists := b.e.mod.items[addrPrefix(kind)+"."+s]; exists {
			hint = fmt.Sprintf(" Did you mean %s.%s (without quotes)?", kind, s)
		}
	case v.Type().IsObjectType() && kind == kindNode && isInstanceCollection(v):
		what = "a collection of node instances"
		hint = " A node block with for_each stands for all its instances; pick one with its key, like node.NAME[\"key\"]."
	}
	b.errorAt(attr, fmt.Sprintf("Invalid %s reference", b.e.mod.noun(kind)),
		fmt.Sprintf("%s must refer to a %s block, like %s, but it is %s.%s", attr, kind, example, what, hint))
}

// isInstanceCollection reports whether v is the value of a for_each node
// block: an object whose attributes are node objects.
func isInstanceCollection(v cty.Value) bool {
	if v.LengthInt() == 0 {
		return false
	}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if kind, _, ok := refTarget(e); !ok || kind != kindNode {
			return false
		}
	}
	return true
}

// decodeInterface decodes a network's interface argument: one name, or a map
// from node name to name. With members known it checks the map's keys.
func (b *blockEval) decodeInterface(n *Network, members []string, checkKeys bool) {
	v, ok := b.known("interface")
	if !ok {
		return
	}
	if s, err := convert.Convert(v, cty.String); err == nil && (v.Type() == cty.String) {
		n.Interface = s.AsString()
		if msg := checkIfname(n.Interface); msg != "" {
			b.errorAt("interface", "Invalid interface name", fmt.Sprintf("%q %s.", n.Interface, msg))
		}
		return
	}
	m, err := convert.Convert(v, cty.Map(cty.String))
	if err != nil || !(v.Type().IsObjectType() || v.Type().IsMapType()) || !m.IsWhollyKnown() {
		b.errorAt("interface", "Incorrect attribute value type",
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
			b.errorAt("interface", "Invalid interface name", fmt.Sprintf("The interface for %s, %q, %s.", key, n.Interfaces[key], msg))
		}
		if !checkKeys || contains(members, key) {
			continue
		}
		// A for_each key names the instance of that key, when exactly one
		// node of the network has it: { for k, h in var.hosts : k => h.iface }.
		var byKey []string
		for _, m := range members {
			if node := b.e.known[m]; node != nil && node.Key == key {
				byKey = append(byKey, m)
			}
		}
		if len(byKey) == 1 {
			if iface, dup := n.Interfaces[byKey[0]]; dup && iface != n.Interfaces[key] {
				b.errorAt("interface", "Conflicting interfaces", fmt.Sprintf("The interface map gives %s both %q (as %q) and %q (as %q); keep one key.", byKey[0], n.Interfaces[key], key, iface, byKey[0]))
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
			if b.computed("interface") {
				detail += " A computed map's keys must be node names, or the for_each keys of the node blocks; " +
					"or give each node its own interface with fabric_interface in the node block (fabric_interface = each.value.iface)."
			} else {
				var keys []string
				for _, m := range members {
					keys = append(keys, m)
					if node := b.e.known[m]; node != nil && node.Key != "" {
						keys = append(keys, node.Key)
					}
				}
				detail += didYouMean(key, keys, "%q") + " Keys are node names, or the for_each key of one node."
			}
		}
		b.errorAt("interface", "Interface for a node not on this network", detail)
	}
}

// computed reports whether attr's expression builds its value (a for
// expression or a function call) rather than writing it out.
func (b *blockEval) computed(attr string) bool {
	a, ok := b.it.attrs[attr]
	if !ok {
		return false
	}
	switch a.Expr.(type) {
	case *hclsyntax.ForExpr, *hclsyntax.FunctionCallExpr:
		return true
	}
	return false
}

// foldNodeInterfaces adds the fabric_interface of each node of the network
// to its interface map; a node the map names differently is an error.
func (b *blockEval) foldNodeInterfaces(n *Network, members []string, nodes map[string]*Node) {
	for _, m := range members {
		node := nodes[m]
		if node == nil || node.FabricInterface == "" {
			continue
		}
		if iface, ok := n.Interfaces[m]; ok && iface != node.FabricInterface {
			b.errorAt("interface", "Conflicting interfaces", fmt.Sprintf("The interface map gives %s %q, but node %s declares fabric_interface = %q. Keep one.", m, iface, m, node.FabricInterface))
			continue
		}
		if n.Interfaces == nil {
			n.Interfaces = map[string]string{}
		}
		n.Interfaces[m] = node.FabricInterface
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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
