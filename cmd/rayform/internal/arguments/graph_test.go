package arguments

import "testing"

func TestParseGraph(t *testing.T) {
	tests := []struct {
		args     []string
		wantErr  string
		wantVars int
	}{
		{nil, "", 0},
		{[]string{"-var=x=1"}, "", 1},
		{[]string{"dir"}, `graph takes no arguments (got "dir"); use -chdir=DIR to graph another directory`, 0},
		{[]string{"-json"}, "flag provided but not defined: -json", 0},
	}
	for _, tt := range tests {
		a, err := ParseGraph(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if err == nil && len(a.Vars.Args) != tt.wantVars {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
