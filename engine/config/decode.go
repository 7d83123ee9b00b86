package config

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
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
	if a := b.e.mod.arg(b.it.kind, attr); a != nil {
		return *a
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

// decodeArgs decodes every argument by its schema type into Decl.Args:
// defaults applied, ranges checked, references as the names of the
// blocks they resolve to. An argument of cty.DynamicPseudoType that is
// not a reference is the kind's to decode ([Block.Known]).
func (b *blockEval) decodeArgs() {
	for _, a := range b.e.mod.args(b.it.kind) {
		switch t := a.Type; {
		case a.Ref != "" && a.ValueType().IsListType():
			b.refList(a.Name, a.Ref)
		case a.Ref != "":
			b.ref(a.Name, a.Ref)
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

// durationType is the Go type a duration string decodes into.
var durationType = reflect.TypeOf(time.Duration(0))

// fill decodes Decl.Args into the fields of v (a pointer to a struct)
// tagged `rayform:"ARG"`, and the instance's name, label and key into the
// fields tagged `rayform:",name"`, `rayform:",label"` and `rayform:",key"`.
func (b *blockEval) fill(v any, name, label, key string) {
	rv := reflect.ValueOf(v).Elem()
	rt := rv.Type()
	for i := range rt.NumField() {
		tag, ok := rt.Field(i).Tag.Lookup("rayform")
		if !ok {
			continue
		}
		f := rv.Field(i)
		switch tag {
		case ",name":
			f.SetString(name)
			continue
		case ",label":
			f.SetString(label)
			continue
		case ",key":
			f.SetString(key)
			continue
		}
		val, ok := b.decl.Args[tag]
		if !ok || val.IsNull() || !val.IsKnown() {
			continue
		}
		if f.Type() == durationType {
			f.SetInt(int64(b.duration(tag, val.AsString())))
			continue
		}
		if err := toGo(val, f); err != nil {
			panic(fmt.Sprintf("config: %s field %s (argument %s): %v", rt, rt.Field(i).Name, tag, err))
		}
	}
}

// toGo stores v in f: a string, bool, int, float64, or a slice or map of
// strings (an unknown or null element is ""). Anything else is the kind's
// programming error.
func toGo(v cty.Value, f reflect.Value) error {
	switch f.Kind() {
	case reflect.String:
		f.SetString(v.AsString())
	case reflect.Bool:
		f.SetBool(v.True())
	case reflect.Int:
		n, _ := v.AsBigFloat().Int64()
		f.SetInt(n)
	case reflect.Float64:
		x, _ := v.AsBigFloat().Float64()
		f.SetFloat(x)
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported type %s", f.Type())
		}
		out := make([]string, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, elemString(e))
		}
		f.Set(reflect.ValueOf(out))
	case reflect.Map:
		if f.Type().Key().Kind() != reflect.String || f.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported type %s", f.Type())
		}
		out := make(map[string]string, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = elemString(e)
		}
		f.Set(reflect.ValueOf(out))
	default:
		return fmt.Errorf("unsupported type %s", f.Type())
	}
	return nil
}

// elemString is a string element's value, "" when unknown or null.
func elemString(e cty.Value) string {
	if e.IsKnown() && !e.IsNull() {
		return e.AsString()
	}
	return ""
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

// strList records a list of strings, or null.
func (b *blockEval) strList(attr string) {
	v, ok := b.known(attr)
	if !ok {
		v = cty.NullVal(cty.List(cty.String))
	}
	b.record(attr, v)
}

// strMap records a map of strings, or null.
func (b *blockEval) strMap(attr string) {
	v, ok := b.known(attr)
	if !ok {
		v = cty.NullVal(cty.Map(cty.String))
	}
	b.record(attr, v)
}

// duration parses a duration argument's value s.
func (b *blockEval) duration(attr, s string) time.Duration {
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

// object is the block's value as expressions see it: attrs (id, name,
// key and the kind's computed attributes) and every exported argument of
// the schema, as set (with its marks) or as decoded (its default, or the
// names a reference resolves to; a reference to several blocks is an
// empty list when unset).
func (b *blockEval) object(attrs map[string]cty.Value) cty.Value {
	for _, a := range b.e.mod.args(b.it.kind) {
		if _, ok := attrs[a.Name]; ok || !a.Exported {
			continue
		}
		v, ok := b.vals[a.Name]
		if d, dflt := b.defaults[a.Name]; !ok && dflt {
			v, ok = d, true
		} else if !ok || a.Ref != "" {
			v, ok = b.decl.Args[a.Name]
		}
		if !ok {
			v = cty.NullVal(a.ValueType())
		}
		if a.Ref != "" && a.ValueType().IsListType() && v.IsNull() {
			v = cty.ListValEmpty(cty.String)
		}
		attrs[a.Name] = v
	}
	return cty.ObjectVal(attrs)
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

// ref decodes an argument that refers to one block of kind, recording
// the referenced instance's name.
func (b *blockEval) ref(attr, kind string) {
	b.record(attr, optStr(b.refName(attr, kind)))
}

func optStr(s string) cty.Value {
	if s == "" {
		return cty.NullVal(cty.String)
	}
	return cty.StringVal(s)
}

// resolves returns the name of the evaluated instance v refers to, when it
// is an instance of kind.
func (b *blockEval) resolves(v cty.Value, kind string) (string, bool) {
	k, name, ok := refTarget(v)
	if !ok || k != kind {
		return "", false
	}
	_, exists := b.e.cfg.blocks[kind][name]
	return name, exists
}

func (b *blockEval) refName(attr, kind string) string {
	v, ok := b.known(attr)
	if !ok {
		return ""
	}
	if name, ok := b.resolves(v, kind); ok {
		return name
	}
	b.badRef(attr, v, kind, fmt.Sprintf("%s = %s.NAME", attr, kind))
	return ""
}

// refList decodes an argument that refers to any number of blocks of
// kind: a list, set or tuple of them, or a for_each block (all its
// instances); it records their names, or null for none.
func (b *blockEval) refList(attr, kind string) {
	names := b.refListNames(attr, kind)
	if len(names) == 0 {
		b.record(attr, cty.NullVal(cty.List(cty.String)))
		return
	}
	vs := make([]cty.Value, len(names))
	for i, n := range names {
		vs[i] = cty.StringVal(n)
	}
	b.record(attr, cty.ListVal(vs))
}

func (b *blockEval) refListNames(attr, kind string) []string {
	v, ok := b.known(attr)
	if !ok {
		return nil
	}
	example := fmt.Sprintf("%s = [%s.a, %s.b]", attr, kind, kind)
	ty := v.Type()
	if !(ty.IsListType() || ty.IsSetType() || ty.IsTupleType() || ty.IsMapType() || (ty.IsObjectType() && !ty.HasAttribute("id"))) {
		b.badRef(attr, v, kind, example)
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		name, ok := b.resolves(e, kind)
		if !ok {
			b.badRef(attr, e, kind, example)
			return nil
		}
		out = append(out, name)
	}
	return out
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
		_, evaluated := b.e.cfg.blocks[kind][s]
		if it, declared := b.e.mod.items[kind+"."+s]; evaluated || declared && it.forEach == nil {
			hint = fmt.Sprintf(" Did you mean %s.%s (without quotes)?", kind, s)
		}
	case v.Type().IsObjectType() && isInstanceCollection(v, kind):
		what = fmt.Sprintf("a collection of %s instances", kind)
		hint = fmt.Sprintf(" A %s block with for_each stands for all its instances; pick one with its key, like %s.NAME[\"key\"].", kind, kind)
	}
	b.errorAt(attr, fmt.Sprintf("Invalid %s reference", b.e.mod.noun(kind)),
		fmt.Sprintf("%s must refer to a %s block, like %s, but it is %s.%s", attr, kind, example, what, hint))
}

// isInstanceCollection reports whether v is the value of a for_each block
// of kind: an object whose attributes are its instances' objects.
func isInstanceCollection(v cty.Value, kind string) bool {
	if v.LengthInt() == 0 {
		return false
	}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if k, _, ok := refTarget(e); !ok || k != kind {
			return false
		}
	}
	return true
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
