package arguments

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/state"
)

// wantError checks a parse's error: none when want is "", else an

// error (not -help) whose text contains want.

func wantError(t *testing.T, args []string, err *ParseError, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%q: unexpected error %v", args, err)
	case want != "" && err == nil:
		t.Errorf("%q: no error, want %q", args, want)
	case want != "" && (err.Help || !strings.Contains(err.Error(), want)):
		t.Errorf("%q: error %q (help %v), want %q", args, err.Error(), err.Help, want)
	}
}

// TestParseErrorKinds: -help asks for the usage (no failure), a bad flag

// carries the flag package's error and the usage, arguments that do not

// fit carry their reason; every kind carries the command's usage.

func TestParseErrorKinds(t *testing.T) {
	tests := []struct {
		args               []string
		help, flag, misfit bool
	}{
		{[]string{"-help"}, true, false, false},
		{[]string{"-h"}, true, false, false},
		{[]string{"-bogus"}, false, true, false},
		{[]string{"-parallelism=x"}, false, true, false},
		{[]string{"extra"}, false, false, true},
	}
	for _, tt := range tests {
		_, err := ParsePlan(tt.args)
		if err == nil {
			t.Fatalf("%q: no error", tt.args)
		}
		if err.Help != tt.help || (err.Flag != nil) != tt.flag || (err.Err != nil) != tt.misfit {
			t.Errorf("%q: help %v, flag %v, err %v", tt.args, err.Help, err.Flag, err.Err)
		}
		if !strings.HasPrefix(err.Usage, "Usage: rayform plan [options]\n") || !strings.Contains(err.Usage, "  -detailed-exitcode\n") {
			t.Errorf("%q: usage %q", tt.args, err.Usage)
		}
	}
}

// TestParseRunFlags: the flags every command that reaches the hosts

// shares, their defaults and their values.

func TestParseRunFlags(t *testing.T) {
	a, err := ParsePlan(nil)
	if err != nil || a.ViewType != ViewHuman || !a.Input || a.StateFile != state.DefaultPath || a.Parallelism != 0 ||
		a.NoLock || a.NoColor || len(a.Targets) != 0 || len(a.Vars.Args) != 0 {
		t.Fatalf("defaults: %+v, %v", a.Run, err)
	}
	a, err = ParsePlan([]string{"-json", "-input=false", "-state=s.json", "-parallelism=3", "-target=a", "-target", "b",
		"-replace=c", "-trust-new-hosts", "-ssh-config=cfg", "-known-hosts=kh", "-project=p", "-var", "x=1", "-var-file=f.hcl", "-no-color"})
	o := a.Run
	if err != nil || o.ViewType != ViewJSON || o.Input || o.StateFile != "s.json" || o.Parallelism != 3 ||
		strings.Join(o.Targets, ",") != "a,b" || strings.Join(o.Replace, ",") != "c" || !o.TrustNewHosts ||
		o.SSHConfig != "cfg" || o.KnownHosts != "kh" || o.Project != "p" || !o.NoColor ||
		len(o.Vars.Args) != 2 || o.Vars.Args[0].File || o.Vars.Args[0].Value != "x=1" || !o.Vars.Args[1].File {
		t.Errorf("flags: %+v, %v", o, err)
	}
}

// TestParseInterspersed checks that logs, output and show take their flags

// before or after the positional argument, and that "--" ends the flags.

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args    []string
		wantPos []string
		wantF   bool
		wantN   string
	}{
		{[]string{"vllm_serve.qwen", "-f", "-tail", "3"}, []string{"vllm_serve.qwen"}, true, "3"},
		{[]string{"-f", "vllm_serve.qwen"}, []string{"vllm_serve.qwen"}, true, "100"},
		{[]string{"a", "-tail=5", "b"}, []string{"a", "b"}, false, "5"},
		{[]string{"--", "-f"}, []string{"-f"}, false, "100"},
		{nil, nil, false, "100"},
	}
	for _, tt := range tests {
		p := newCommand("logs", "logs", &Common{})
		f := p.fs.Bool("f", false, "")
		n := p.fs.String("tail", "100", "")
		pos, err := p.parseInterspersed(tt.args)
		if err != nil || strings.Join(pos, " ") != strings.Join(tt.wantPos, " ") || *f != tt.wantF || *n != tt.wantN {
			t.Errorf("%q: pos %q, -f %v, -tail %s (err %v); want %q, %v, %s", tt.args, pos, *f, *n, err, tt.wantPos, tt.wantF, tt.wantN)
		}
	}
}

// TestNoColorFlag: -no-color after the command sets NoColor; =false

// leaves it, a bad value is refused.

func TestNoColorFlag(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		want    bool
		wantErr string
	}{
		{nil, false, ""}, {[]string{"-no-color"}, true, ""}, {[]string{"-no-color=false"}, false, ""},
		{[]string{"-no-color=x"}, false, `invalid boolean value "x" for -no-color`},
	} {
		a, err := ParseGraph(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if err == nil && a.NoColor != tt.want {
			t.Errorf("%q: NoColor %v", tt.args, a.NoColor)
		}
	}
}
