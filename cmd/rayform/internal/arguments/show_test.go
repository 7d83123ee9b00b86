package arguments

import "testing"

func TestParseShow(t *testing.T) {
	tests := []struct {
		args     []string
		wantErr  string
		wantPlan string
		wantView ViewType
	}{
		{nil, "", "", ViewHuman},
		{[]string{"p.plan", "-json"}, "", "p.plan", ViewJSON},
		{[]string{"a", "b"}, `show takes at most one argument, a saved plan (got ["a" "b"])`, "", ViewHuman},
		{[]string{"-json=x"}, `invalid boolean value "x" for -json`, "", ViewHuman},
	}
	for _, tt := range tests {
		a, err := ParseShow(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if err == nil && (a.PlanPath != tt.wantPlan || a.ViewType != tt.wantView) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
