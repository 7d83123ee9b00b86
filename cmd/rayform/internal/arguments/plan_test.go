package arguments

import "testing"

func TestParsePlan(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Plan) bool
	}{
		{nil, "", func(a *Plan) bool { return !a.DetailedExitCode && a.Out == "" && !a.RefreshOnly && !a.Destroy }},
		{[]string{"-detailed-exitcode", "-out=p.plan", "-refresh-only"}, "", func(a *Plan) bool { return a.DetailedExitCode && a.Out == "p.plan" && a.RefreshOnly }},
		{[]string{"-destroy"}, "", func(a *Plan) bool { return a.Destroy }},
		{[]string{"-destroy", "-refresh-only"}, "-destroy cannot be combined with -refresh-only or -replace", nil},
		{[]string{"-destroy", "-replace=x"}, "-destroy cannot be combined", nil},
		{[]string{"x"}, `plan takes no arguments (got ["x"])`, nil},
		{[]string{"-detailed-exitcode=maybe"}, `invalid boolean value "maybe" for -detailed-exitcode`, nil},
	}
	for _, tt := range tests {
		a, err := ParsePlan(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
