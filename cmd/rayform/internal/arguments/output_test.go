package arguments

import (
	"testing"

	"github.com/rayform/rayform/engine/state"
)

func TestParseOutput(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Output) bool
	}{
		{nil, "", func(a *Output) bool {
			return a.Name == "" && !a.Raw && a.ViewType == ViewHuman && a.StateFile == state.DefaultPath
		}},
		{[]string{"url", "-json", "-state=s.json", "-var=x=1"}, "", func(a *Output) bool {
			return a.Name == "url" && a.ViewType == ViewJSON && a.StateFile == "s.json" && len(a.Vars.Args) == 1
		}},
		{[]string{"-raw", "url"}, "", func(a *Output) bool { return a.Raw && a.Name == "url" }},
		{[]string{"a", "b"}, `output takes at most one argument, an output's name (got ["a" "b"])`, nil},
		{[]string{"-raw"}, "-raw needs an output name: rayform output -raw NAME", nil},
		{[]string{"-raw", "-json", "x"}, "-raw and -json cannot be combined", nil},
	}
	for _, tt := range tests {
		a, err := ParseOutput(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
