package config

import (
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// valueMark is the type of the cty marks this package sets.
type valueMark string

// Sensitive marks cty values derived from a sensitive variable.
const Sensitive = valueMark("sensitive")

// SensitiveText is what a message prints in place of a sensitive value.
const SensitiveText = "(sensitive value)"

// FormatPath renders the path p below attribute attr as configurations
// write it: env["HF_TOKEN"], extra_args[2], node.address.
func FormatPath(attr string, p cty.Path) string {
	var b strings.Builder
	b.WriteString(attr)
	for _, step := range p {
		switch s := step.(type) {
		case cty.GetAttrStep:
			b.WriteString("." + s.Name)
		case cty.IndexStep:
			k, _ := s.Key.Unmark()
			switch {
			case !k.IsKnown() || k.IsNull():
				b.WriteString("[*]")
			case k.Type() == cty.String:
				b.WriteString("[" + strconv.Quote(k.AsString()) + "]")
			case k.Type() == cty.Number:
				b.WriteString("[" + k.AsBigFloat().Text('f', -1) + "]")
			default:
				b.WriteString("[*]")
			}
		}
	}
	return b.String()
}

// unknownPaths lists the paths below attr whose values are unknown.
func unknownPaths(attr string, v cty.Value) []string {
	var out []string
	_ = cty.Walk(v, func(p cty.Path, v cty.Value) (bool, error) {
		if !v.IsKnown() {
			out = append(out, FormatPath(attr, p))
			return false, nil
		}
		return true, nil
	})
	return out
}

// redactSensitive rewrites the diagnostics of evaluating an expression
// that refers to a sensitive value: their detail may quote the value (a
// function's "cannot convert \"...\" to number"), so it is replaced by
// a note, and the evaluation context goes, so that no renderer lists the
// values the expression refers to.
func redactSensitive(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Expression == nil || d.EvalContext == nil || !refersToSensitive(d.Expression, d.EvalContext) {
			out = append(out, d)
			continue
		}
		c := *d
		c.Detail = "The details are not shown because the expression refers to a sensitive value, which they may quote."
		c.EvalContext = nil
		c.Extra = nil
		out = append(out, &c)
	}
	return out
}

// refersToSensitive reports whether a value expr refers to (as far as its
// references resolve in ctx) is or contains a sensitive value.
func refersToSensitive(expr hcl.Expression, ctx *hcl.EvalContext) bool {
	for _, t := range expr.Variables() {
		for n := len(t); n > 0; n-- {
			v, diags := hcl.Traversal(t[:n]).TraverseAbs(ctx)
			if diags.HasErrors() {
				continue
			}
			_, marks := v.UnmarkDeep()
			if _, ok := marks[Sensitive]; ok {
				return true
			}
			break
		}
	}
	return false
}
