package arguments

import (
	"strings"
	"testing"
)

func TestParseGlobal(t *testing.T) {
	tests := []struct {
		args        []string
		wantErr     string
		wantCommand string
		wantArgs    string
		check       func(*Global) bool
	}{
		{nil, "", "", "", func(g *Global) bool { return g.LogLevel == "env" && !g.NoColor && !g.Version && g.Chdir == "" }},
		{[]string{"-chdir=d", "-no-color", "-log-level=debug", "plan", "-json"}, "", "plan", "-json", func(g *Global) bool {
			return g.Chdir == "d" && g.NoColor && g.LogLevel == "debug"
		}},
		{[]string{"-version"}, "", "", "", func(g *Global) bool { return g.Version }},
		{[]string{"-bogus", "plan"}, "flag provided but not defined: -bogus", "", "", nil},
	}
	for _, tt := range tests {
		g, err := ParseGlobal(tt.args, "env")
		wantError(t, tt.args, err, tt.wantErr)
		if err != nil {
			if err.Usage != "" {
				t.Errorf("%q: global usage %q, want none (the caller prints the commands)", tt.args, err.Usage)
			}
			continue
		}
		if g.Command != tt.wantCommand || strings.Join(g.Args, " ") != tt.wantArgs || !tt.check(g) {
			t.Errorf("%q: %+v", tt.args, g)
		}
	}
	for _, tt := range []struct{ level, wantErr string }{{"", ""}, {"debug", ""}, {"off", ""}, {"loud", `invalid log level "loud" (want trace, debug, info, warn, error or off)`}} {
		_, err := (&Global{LogLevel: tt.level}).Level()
		if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("level %q: %v, want %q", tt.level, err, tt.wantErr)
		}
	}
}
