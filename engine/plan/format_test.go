package plan

import (
	"math/big"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestFormatValue is the one rendering of a value as HCL (rayform output,
// apply's Outputs, the plan's attribute values): numbers in full, strings
// quoted so HCL reads them back as the same string.
func TestFormatValue(t *testing.T) {
	big20, _ := new(big.Float).SetString("100000000000000000000")
	tests := []struct {
		name string
		v    cty.Value
		want string
	}{
		{"string", cty.StringVal("a\"b\n"), `"a\"b\n"`},
		{"template sequences are escaped", cty.StringVal("${x} %{y}"), `"$${x} %%{y}"`},
		{"int", cty.NumberIntVal(8000), "8000"},
		{"negative", cty.NumberIntVal(-3), "-3"},
		{"fraction", cty.NumberFloatVal(0.85), "0.85"},
		{"small fraction in full", cty.NumberFloatVal(0.0000001), "0.0000001"},
		{"beyond int64", cty.NumberVal(big20), "100000000000000000000"},
		{"bool", cty.True, "true"},
		{"null", cty.NullVal(cty.String), "null"},
		{"unknown", cty.UnknownVal(cty.String), "(known after apply)"},
		{"sensitive", cty.StringVal("s").Mark("sensitive"), "(sensitive value)"},
		{"empty list", cty.ListValEmpty(cty.String), "[]"},
		{"empty map", cty.MapValEmpty(cty.String), "{}"},
		{"list", cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}), "[\n    \"a\",\n    \"b\",\n]"},
		{"map", cty.MapVal(map[string]cty.Value{"b": cty.NumberIntVal(2), "aa": cty.NumberIntVal(1)}), "{\n    \"aa\" = 1\n    \"b\"  = 2\n}"},
		{"object", cty.ObjectVal(map[string]cty.Value{"a": cty.True, "x-y": cty.StringVal("${z}")}), "{\n    a   = true\n    x-y = \"$${z}\"\n}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatValue(tt.v); got != tt.want {
				t.Errorf("FormatValue(%#v) = %q, want %q", tt.v, got, tt.want)
			}
		})
	}
}
