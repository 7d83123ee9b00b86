package arguments

import (
	"strings"
	"testing"
)

func TestParseDiagnose(t *testing.T) {
	tests := []struct {
		args      []string
		wantErr   string
		wantPaths string
		wantView  ViewType
	}{
		{nil, "", "-", ViewHuman},
		{[]string{"a.log", "-json", "-"}, "", "a.log -", ViewJSON},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus", "", ViewHuman},
	}
	for _, tt := range tests {
		a, err := ParseDiagnose(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if err == nil && (strings.Join(a.Paths, " ") != tt.wantPaths || a.ViewType != tt.wantView) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
