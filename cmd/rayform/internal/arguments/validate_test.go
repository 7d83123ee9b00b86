package arguments

import "testing"

func TestParseValidate(t *testing.T) {
	tests := []struct {
		args     []string
		wantErr  string
		wantView ViewType
		wantVars int
	}{
		{nil, "", ViewHuman, 0},
		{[]string{"-json", "-var=x=1", "-var-file=v.hcl"}, "", ViewJSON, 2},
		{[]string{"dir", "two"}, `validate takes no arguments (got "dir two"); use -chdir=DIR to validate another directory`, ViewHuman, 0},
		{[]string{"-json=x"}, `invalid boolean value "x" for -json`, ViewHuman, 0},
	}
	for _, tt := range tests {
		a, err := ParseValidate(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if err == nil && (a.ViewType != tt.wantView || len(a.Vars.Args) != tt.wantVars) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
