package config

import (
	"strconv"
	"strings"

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
