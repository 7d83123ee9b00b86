package arguments

import "testing"

func TestParseApply(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Apply) bool
	}{
		{nil, "", func(a *Apply) bool {
			return !a.AutoApprove && !a.NotAtomic && a.PlanPath == "" && !a.NoLock && a.LockTimeout == 0
		}},
		{[]string{"-auto-approve", "-atomic=false", "-rotate-token", "-lock=false", "-lock-timeout=5s"}, "", func(a *Apply) bool {
			return a.AutoApprove && a.NotAtomic && a.RotateToken && a.NoLock && a.LockTimeout.String() == "5s"
		}},
		{[]string{"saved.plan"}, "", func(a *Apply) bool { return a.PlanPath == "saved.plan" }},
		{[]string{"-json", "saved.plan"}, "", func(a *Apply) bool { return a.ViewType == ViewJSON }},
		{[]string{"-json", "-auto-approve"}, "", nil},
		{[]string{"a", "b"}, `apply takes at most one argument, a saved plan (got ["a" "b"])`, nil},
		{[]string{"-json"}, "Plan file or auto-approve required\n\nrayform cannot ask for interactive approval when -json is set.", nil},
		{[]string{"-input=false"}, "when -input=false is set", nil},
		{[]string{"-lock=maybe"}, `invalid boolean value "maybe" for -lock`, nil},
		{[]string{"-lock-timeout=soon"}, `invalid value "soon" for flag -lock-timeout`, nil},
	}
	for _, tt := range tests {
		a, err := ParseApply(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v %+v", tt.args, a, a.Run)
		}
	}
}
