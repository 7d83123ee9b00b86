package arguments

import "testing"

func TestParseStatus(t *testing.T) {
	tests := []struct {
		args      []string
		wantErr   string
		wantWatch string
	}{
		{nil, "", "0s"},
		{[]string{"-watch=5s"}, "", "5s"},
		{[]string{"x"}, `status takes no arguments (got ["x"])`, ""},
		{[]string{"-watch=often"}, `invalid value "often" for flag -watch`, ""},
	}
	for _, tt := range tests {
		a, err := ParseStatus(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if err == nil && a.Watch.String() != tt.wantWatch {
			t.Errorf("%q: watch %s", tt.args, a.Watch)
		}
	}
}
