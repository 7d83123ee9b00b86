package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// valueMark is the type of the cty marks this package sets.
type valueMark string

// Sensitive marks cty values derived from a sensitive variable.
const Sensitive = valueMark("sensitive")

// Text a renderer prints in place of values it must not or cannot show.
const (
	UnknownText   = "(known after observe)"
	SensitiveText = "(sensitive value)"
)

// FormatValue renders v in HCL syntax on one line, printing values known
// only after observing the hosts as UnknownText and sensitive values as
// SensitiveText.
func FormatValue(v cty.Value) string {
	var b strings.Builder
	formatValue(&b, v)
	return b.String()
}

func formatValue(b *strings.Builder, v cty.Value) {
	if v.HasMark(Sensitive) {
		b.WriteString(SensitiveText)
		return
	}
	v, _ = v.Unmark()
	switch {
	case v == cty.NilVal:
		b.WriteString("null")
		return
	case !v.IsKnown():
		b.WriteString(UnknownText)
		return
	case v.IsNull():
		b.WriteString("null")
		return
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		b.WriteString(quote(v.AsString()))
	case ty == cty.Number:
		b.WriteString(v.AsBigFloat().Text('f', -1))
	case ty == cty.Bool:
		b.WriteString(strconv.FormatBool(v.True()))
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		b.WriteByte('[')
		i := 0
		for it := v.ElementIterator(); it.Next(); i++ {
			_, e := it.Element()
			if i > 0 {
				b.WriteString(", ")
			}
			formatValue(b, e)
		}
		b.WriteByte(']')
	case ty.IsMapType() || ty.IsObjectType():
		if v.LengthInt() == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{ ")
		i := 0
		for it := v.ElementIterator(); it.Next(); i++ {
			k, e := it.Element()
			if i > 0 {
				b.WriteString(", ")
			}
			key := k.AsString()
			if !isIdentifier(key) {
				key = quote(key)
			}
			b.WriteString(key)
			b.WriteString(" = ")
			formatValue(b, e)
		}
		b.WriteString(" }")
	default:
		fmt.Fprintf(b, "%#v", v)
	}
}

// quote writes s as an HCL quoted string.
func quote(s string) string {
	q := strconv.Quote(s)
	return strings.NewReplacer("${", "$${", "%{", "%%{").Replace(q)
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !letter && (i == 0 || !(r == '-' || (r >= '0' && r <= '9'))) {
			return false
		}
	}
	return true
}

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
