package arguments

import (
	"strings"
	"testing"
)

func TestParseFmt(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Fmt) bool
	}{
		{nil, "", func(a *Fmt) bool {
			return a.List && a.Write && !a.Diff && !a.Check && !a.Recursive && len(a.Paths) == 0
		}},
		// -check writes nothing.
		{[]string{"-check", "-diff", "-recursive", "a", "b"}, "", func(a *Fmt) bool {
			return a.Check && !a.Write && a.Diff && a.Recursive && strings.Join(a.Paths, " ") == "a b"
		}},
		{[]string{"-list=false", "-write=false", "-"}, "", func(a *Fmt) bool { return !a.List && !a.Write && a.Paths[0] == "-" }},
		{[]string{"-", "a.hcl"}, `"-" (stdin) cannot be combined with other paths`, nil},
		{[]string{"-check=x"}, `invalid boolean value "x" for -check`, nil},
	}
	for _, tt := range tests {
		a, err := ParseFmt(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
