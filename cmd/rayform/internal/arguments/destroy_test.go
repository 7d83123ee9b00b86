package arguments

import "testing"

func TestParseDestroy(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Destroy) bool
	}{
		{nil, "", func(a *Destroy) bool { return !a.AutoApprove && !a.NoLock }},
		{[]string{"-auto-approve", "-json", "-target=x", "-lock=false"}, "", func(a *Destroy) bool {
			return a.AutoApprove && a.ViewType == ViewJSON && len(a.Targets) == 1 && a.NoLock
		}},
		{[]string{"-replace=x"}, "destroy does not take -replace", nil},
		{[]string{"x"}, `destroy takes no arguments (got ["x"])`, nil},
		{[]string{"-input=false"}, "-auto-approve required\n\nrayform cannot ask for interactive approval when -input=false is set.", nil},
		{[]string{"-rotate-token"}, "flag provided but not defined: -rotate-token", nil},
	}
	for _, tt := range tests {
		a, err := ParseDestroy(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
