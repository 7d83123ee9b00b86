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
	var diags hcl.Diagnostics
	declared := map[string]*item{}
	var names []string
	for _, addr := range m.order {
		if it := m.items[addr]; it.kind == kindVariable {
			declared[it.name] = it
			names = append(names, it.name)
		}
	}
	sort.Strings(names)
	raw := map[string]rawInput{}

	envNames := make([]string, 0)
	envVals := map[string]string{}
	for _, kv := range opts.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		name := strings.TrimPrefix(k, EnvPrefix)
		if _, ok := declared[name]; !ok {
			continue // like Terraform: undeclared environment values are ignored
		}
		envNames = append(envNames, name)
		envVals[name] = v
	}
	for _, name := range envNames {
		raw[name] = rawInput{source: "env", str: envVals[name], isStr: true, file: fmt.Sprintf("<value for var.%s from %s%s>", name, EnvPrefix, name)}
	}

	for _, arg := range opts.Args {
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

	values := map[string]cty.Value{}
	vars := map[string]*Variable{}
	for _, name := range names {
		it := declared[name]
		d := it.variable
		v := &Variable{
			Name:        name,
			Description: d.description,
			Type:        d.typ,
			Default:     d.def,
			Sensitive:   d.sensitive,
			DeclRange:   it.declRange,
		}
		vars[name] = v
		val, valRange, more := convertInput(p, name, d, raw[name])
		if d.sensitive {
			// The value's own text (from -var, the environment or a
			// variable file) would be the snippet of these diagnostics:
			// point at the declaration.
			more = pointAt(more, it.declRange)
			valRange = nil
		}
		diags = append(diags, more...)
		if more.HasErrors() {
			continue
		}
		switch {
		case raw[name].source != "" && !val.IsNull():
			v.Source = raw[name].source
		case d.def != cty.NilVal:
			val, valRange, v.Source = d.def, d.defRange.Ptr(), "default"
		case opts.UnknownVariables:
			// Unknown, as in Terraform's validate: its validation rules
			// cannot be checked without a value.
			v.Value = cty.UnknownVal(d.typ)
			if d.sensitive {
				values[name] = v.Value.Mark(Sensitive)
			} else {
				values[name] = v.Value
			}
			continue
		default:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "No value for required variable",
				Detail: fmt.Sprintf("The variable %q has no default, so it needs a value: pass -var '%s=...', set it in a file given with -var-file, or set the environment variable %s%s.",
					name, name, EnvPrefix, name),
				Subject: it.declRange.Ptr(),
			})
			continue
		}
		v.Value = val
		more = validateVariable(m, it, val, d.sensitive, valRange)
		diags = append(diags, more...)
		if d.sensitive {
			val = val.Mark(Sensitive)
		}
		values[name] = val
	}
	return values, vars, diags
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
