package arguments

import "testing"

func TestParseUnlock(t *testing.T) {
	tests := []struct {
		args      []string
		wantErr   string
		wantForce bool
		wantName  string
	}{
		{[]string{"spark"}, "", false, "spark"},
		{[]string{"-force", "ray_cluster.spark"}, "", true, "ray_cluster.spark"},
		{nil, "force-unlock takes one argument, the ray_cluster's name", false, ""},
		{[]string{"a", "b"}, "force-unlock takes one argument", false, ""},
		{[]string{"-force=x", "a"}, `invalid boolean value "x" for -force`, false, ""},
	}
	for _, tt := range tests {
		a, err := ParseUnlock(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if err == nil && (a.Force != tt.wantForce || a.Resource != tt.wantName) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
