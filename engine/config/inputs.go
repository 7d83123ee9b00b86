package config

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// rawInput is a variable's value before conversion to its type.
type rawInput struct {
	source string         // "env", "-var", or a file name
	expr   hcl.Expression // from a file or a parsed -var/env value
	str    string         // a -var/env value, used as is for primitive types
	isStr  bool
	file   string // pseudo file name holding str, for diagnostics
}

// resolveVariables computes every variable's value from its default, the
// environment and the -var/-var-file options, in Terraform's precedence:
// default < RAYFORM_VAR_<name> < -var and -var-file in command-line order.
// It then runs the variables' validation rules. Sensitive values are marked.
func (m *module) resolveVariables(p *hclparse.Parser, opts Options) (map[string]cty.Value, map[string]*Variable, hcl.Diagnostics) {
	declared, names := m.declaredVariables()
	raw := map[string]rawInput{}
	envInputs(opts.Env, declared, raw)
	diags := argInputs(p, opts.Args, declared, names, raw)

	values := map[string]cty.Value{}
	vars := map[string]*Variable{}
	for _, name := range names {
		v, val, more := m.resolveVariable(p, declared[name], raw[name], opts.UnknownVariables)
		vars[name] = v
		diags = append(diags, more...)
		if val != cty.NilVal {
			values[name] = val
		}
	}
	return values, vars, diags
}

// declaredVariables returns the declared variables by name, and their
// names sorted.
func (m *module) declaredVariables() (map[string]*item, []string) {
	declared := map[string]*item{}
	var names []string
	for _, addr := range m.order {
		if it := m.items[addr]; it.kind == kindVariable {
			declared[it.name] = it
			names = append(names, it.name)
		}
	}
	sort.Strings(names)
	return declared, names
}

// envInputs records in raw the values of declared variables set as
// RAYFORM_VAR_<name> in env (NAME=VALUE entries; the last one wins).
func envInputs(env []string, declared map[string]*item, raw map[string]rawInput) {
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		name := strings.TrimPrefix(k, EnvPrefix)
		if _, ok := declared[name]; !ok {
			continue // like Terraform: undeclared environment values are ignored
		}
		raw[name] = rawInput{source: "env", str: v, isStr: true, file: fmt.Sprintf("<value for var.%s from %s%s>", name, EnvPrefix, name)}
	}
}

// argInputs records in raw the values of the -var and -var-file options,
// in command-line order (a later one wins over an earlier one and over
// the environment).
func argInputs(p *hclparse.Parser, args []VarArg, declared map[string]*item, names []string, raw map[string]rawInput) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, arg := range args {
		if arg.File {
			diags = append(diags, readVarFile(p, arg.Value, declared, names, raw)...)
			continue
		}
		name, value, ok := strings.Cut(arg.Value, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail: fmt.Sprintf("The given -var option %q is not correctly specified. It must be a variable name and a value separated by an equals sign, like -var=\"key=value\".",
					arg.Value),
			})
			continue
		}
		if _, ok := declared[name]; !ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail: fmt.Sprintf("A variable named %q was assigned with -var, but it is not declared.%s Declare it with a variable %q {} block, or remove the option.",
					name, didYouMean(name, names, "%q"), name),
			})
			continue
		}
		raw[name] = rawInput{source: "-var", str: value, isStr: true, file: fmt.Sprintf("<value for var.%s>", name)}
	}
	return diags
}

// resolveVariable returns the declared variable it with its value: the
// input given, else its default, else (with unknown) an unknown value; its
// validation rules run on a known value. The value for expressions is
// marked when the variable is sensitive, and cty.NilVal when there is none.
func (m *module) resolveVariable(p *hclparse.Parser, it *item, in rawInput, unknown bool) (*Variable, cty.Value, hcl.Diagnostics) {
	d := it.variable
	v := &Variable{
		Name:        it.name,
		Description: d.description,
		Type:        d.typ,
		Default:     d.def,
		Sensitive:   d.sensitive,
		DeclRange:   it.declRange,
	}
	val, valRange, diags := convertInput(p, it.name, d, in)
	if d.sensitive {
		// The value's own text (from -var, the environment or a
		// variable file) would be the snippet of these diagnostics:
		// point at the declaration.
		diags = pointAt(diags, it.declRange)
		valRange = nil
	}
	if diags.HasErrors() {
		return v, cty.NilVal, diags
	}
	switch {
	case in.source != "" && !val.IsNull():
		v.Source = in.source
	case d.def != cty.NilVal:
		val, valRange, v.Source = d.def, d.defRange.Ptr(), "default"
	case unknown:
		// Unknown, as in Terraform's validate: its validation rules
		// cannot be checked without a value.
		v.Value = cty.UnknownVal(d.typ)
		return v, markIf(v.Value, d.sensitive), diags
	default:
		return v, cty.NilVal, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No value for required variable",
			Detail: fmt.Sprintf("The variable %q has no default, so it needs a value: pass -var '%s=...', set it in a file given with -var-file, or set the environment variable %s%s.",
				it.name, it.name, EnvPrefix, it.name),
			Subject: it.declRange.Ptr(),
		})
	}
	v.Value = val
	diags = append(diags, validateVariable(m, it, val, d.sensitive, valRange)...)
	return v, markIf(val, d.sensitive), diags
}

// markIf returns v marked Sensitive when sensitive is set.
func markIf(v cty.Value, sensitive bool) cty.Value {
	if sensitive {
		return v.Mark(Sensitive)
	}
	return v
}

// readVarFile parses a -var-file and records its values in raw.
func readVarFile(p *hclparse.Parser, path string, declared map[string]*item, names []string, raw map[string]rawInput) hcl.Diagnostics {
	b, err := os.ReadFile(path)
	if err != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read variables file",
			Detail:   fmt.Sprintf("Cannot read the file given with -var-file: %v.", err),
		}}
	}
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		f, diags = p.ParseJSON(b, path)
	} else {
		f, diags = p.ParseHCL(b, path)
	}
	if diags.HasErrors() {
		return diags
	}
	attrs, more := f.Body.JustAttributes()
	diags = append(diags, more...)
	for _, a := range sortedAttrs(attrs) {
		if _, ok := declared[a.Name]; !ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Value for undeclared variable",
				Detail: fmt.Sprintf("The variables file %s sets %q, which is not declared, so the value is ignored.%s",
					path, a.Name, didYouMean(a.Name, names, "%q")),
				Subject: a.NameRange.Ptr(),
			})
			continue
		}
		raw[a.Name] = rawInput{source: path, expr: a.Expr}
	}
	return diags
}

// convertInput turns a raw input into a value of the variable's type. A
// missing input yields a null value.
func convertInput(p *hclparse.Parser, name string, d *variableDecl, in rawInput) (cty.Value, *hcl.Range, hcl.Diagnostics) {
	if in.source == "" {
		return cty.NullVal(d.typ), nil, nil
	}
	var val cty.Value
	var rng *hcl.Range
	var diags hcl.Diagnostics
	switch {
	case in.isStr && (d.typ.IsPrimitiveType() || d.typ == cty.DynamicPseudoType):
		val = cty.StringVal(in.str)
		src := []byte(in.str)
		p.AddFile(in.file, &hcl.File{Body: hcl.EmptyBody(), Bytes: src})
		rng = &hcl.Range{Filename: in.file, Start: hcl.InitialPos, End: hcl.Pos{Line: 1, Column: len(src) + 1, Byte: len(src)}}
	case in.isStr:
		src := []byte(in.str)
		expr, more := hclsyntax.ParseExpression(src, in.file, hcl.InitialPos)
		p.AddFile(in.file, &hcl.File{Body: hcl.EmptyBody(), Bytes: src})
		diags = append(diags, more...)
		if more.HasErrors() {
			return cty.NilVal, nil, diags
		}
		val, more = expr.Value(nil)
		diags = append(diags, more...)
		rng = expr.Range().Ptr()
	default:
		var more hcl.Diagnostics
		val, more = in.expr.Value(nil)
		diags = append(diags, more...)
		rng = in.expr.Range().Ptr()
	}
	if diags.HasErrors() {
		return cty.NilVal, nil, diags
	}
	conv, err := convert.Convert(val, d.typ)
	if err != nil {
		return cty.NilVal, nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for input variable",
			Detail: fmt.Sprintf("The value given for var.%s (from %s) is not a valid %s: %s.",
				name, in.source, typeexpr.TypeString(d.typ), errText(err)),
			Subject: rng,
		})
	}
	return conv, rng, diags
}

// validateVariable runs a variable's validation rules against val, marked
// when the variable is sensitive so that no message shows it.
func validateVariable(m *module, it *item, val cty.Value, sensitive bool, valRange *hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if sensitive {
		val = val.Mark(Sensitive)
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{it.name: val})},
		Functions: Functions(m.baseDir),
	}
	for _, rule := range it.variable.validations {
		ok, more := rule.condition.Value(ctx)
		more = redactSensitive(more)
		diags = append(diags, more...)
		if more.HasErrors() {
			continue
		}
		ok, _ = ok.UnmarkDeep()
		ok, err := convert.Convert(ok, cty.Bool)
		if err != nil || ok.IsNull() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid validation condition",
				Detail:   "A validation condition must produce true or false.",
				Subject:  rule.condition.Range().Ptr(),
			})
			continue
		}
		if ok.True() {
			continue
		}
		msgVal, more := rule.errorMessage.Value(ctx)
		more = redactSensitive(more)
		diags = append(diags, more...)
		msg := "The value does not satisfy the validation rule."
		switch {
		case more.HasErrors():
		case msgVal.ContainsMarked():
			msg = "The value does not satisfy the validation rule. Its error_message is derived from the sensitive value, so rayform does not show it."
		default:
			if s, err := convert.Convert(msgVal, cty.String); err == nil && !s.IsNull() && s.IsKnown() {
				msg = s.AsString()
			}
		}
		subject := valRange
		if subject == nil || sensitive {
			subject = rule.condition.Range().Ptr()
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail: fmt.Sprintf("%s\n\nThis was checked by the validation rule at %s.",
				msg, rule.condition.Range()),
			Subject: subject,
		})
	}
	return diags
}

// pointAt makes diags point at rng instead of where they were found.
func pointAt(diags hcl.Diagnostics, rng hcl.Range) hcl.Diagnostics {
	out := make(hcl.Diagnostics, len(diags))
	for i, d := range diags {
		c := *d
		c.Subject, c.Context = rng.Ptr(), nil
		out[i] = &c
	}
	return out
}
