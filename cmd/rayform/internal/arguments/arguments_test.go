package arguments

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources"
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

func TestParseCheck(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Check) bool
	}{
		{nil, "", func(a *Check) bool {
			return a.Options.Timeout == resources.DefaultCheckTimeout && a.Options.SizeMiB == resources.DefaultCheckSizeMiB && a.Options.Backends == "auto" && len(a.Options.Env) == 0 && len(a.Clusters) == 0
		}},
		{[]string{"-json", "-timeout=30s", "-size-mb=8", "-backends=gloo", "-env", "NCCL_IB_HCA=mlx5", "-env", "X=", "spark", "ray_cluster.b"}, "", func(a *Check) bool {
			return a.ViewType == ViewJSON && a.Options.Timeout.String() == "30s" && a.Options.SizeMiB == 8 && a.Options.Backends == "gloo" &&
				len(a.Options.Env) == 2 && a.Options.Env["NCCL_IB_HCA"] == "mlx5" && a.Options.Env["X"] == "" &&
				strings.Join(a.Clusters, " ") == "spark ray_cluster.b"
		}},
		{[]string{"-env", "=1"}, `-env "=1": want NAME=VALUE`, nil},
		{[]string{"-env", "X"}, `-env "X": want NAME=VALUE`, nil},
		{[]string{"-timeout=x"}, `invalid value "x" for flag -timeout`, nil},
		{[]string{"-size-mb=big"}, `invalid value "big" for flag -size-mb`, nil},
	}
	for _, tt := range tests {
		a, err := ParseCheck(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}

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

func TestParseLogs(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Logs) bool
	}{
		{[]string{"ray_cluster.x"}, "", func(a *Logs) bool {
			q := a.Query
			return q.Address == "ray_cluster.x" && q.Tail == 100 && !q.Follow && q.Node == "" && q.Since == "" && !q.Previous
		}},
		// Flags before or after the address, as people type them.
		{[]string{"vllm_serve.q", "-f", "-tail=5", "-node", "h1", "-since=10m", "-previous"}, "", func(a *Logs) bool {
			q := a.Query
			return q.Address == "vllm_serve.q" && q.Follow && q.Tail == 5 && q.Node == "h1" && q.Since == "10m" && q.Previous
		}},
		{nil, "logs takes one argument, a resource address (ray_cluster.NAME or vllm_serve.NAME)", nil},
		{[]string{"a", "b"}, "logs takes one argument", nil},
		{[]string{"a", "-tail=x"}, `invalid value "x" for flag -tail`, nil},
	}
	for _, tt := range tests {
		a, err := ParseLogs(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}

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

func TestParseOutput(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Output) bool
	}{
		{nil, "", func(a *Output) bool {
			return a.Name == "" && !a.Raw && a.ViewType == ViewHuman && a.StateFile == state.DefaultPath
		}},
		{[]string{"url", "-json", "-state=s.json", "-var=x=1"}, "", func(a *Output) bool {
			return a.Name == "url" && a.ViewType == ViewJSON && a.StateFile == "s.json" && len(a.Vars.Args) == 1
		}},
		{[]string{"-raw", "url"}, "", func(a *Output) bool { return a.Raw && a.Name == "url" }},
		{[]string{"a", "b"}, `output takes at most one argument, an output's name (got ["a" "b"])`, nil},
		{[]string{"-raw"}, "-raw needs an output name: rayform output -raw NAME", nil},
		{[]string{"-raw", "-json", "x"}, "-raw and -json cannot be combined", nil},
	}
	for _, tt := range tests {
		a, err := ParseOutput(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}

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

func TestParseValidateAndGraph(t *testing.T) {
	tests := []struct {
		name    string
		parse   func([]string) (*Vars, *ParseError)
		args    []string
		wantErr string
	}{
		{"validate", func(a []string) (*Vars, *ParseError) { v, err := ParseValidate(a); return &v.Vars, err }, []string{"-json", "-var=x=1"}, ""},
		{"validate", func(a []string) (*Vars, *ParseError) { v, err := ParseValidate(a); return &v.Vars, err }, []string{"dir", "two"},
			`validate takes no arguments (got "dir two"); use -chdir=DIR to validate another directory`},
		{"graph", func(a []string) (*Vars, *ParseError) { v, err := ParseGraph(a); return &v.Vars, err }, []string{"-var=x=1"}, ""},
		{"graph", func(a []string) (*Vars, *ParseError) { v, err := ParseGraph(a); return &v.Vars, err }, []string{"dir"},
			`graph takes no arguments (got "dir"); use -chdir=DIR to graph another directory`},
		{"graph", func(a []string) (*Vars, *ParseError) { v, err := ParseGraph(a); return &v.Vars, err }, []string{"-json"},
			"flag provided but not defined: -json"},
	}
	for _, tt := range tests {
		vars, err := tt.parse(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if err == nil && len(vars.Args) != 1 {
			t.Errorf("%s %q: vars %+v", tt.name, tt.args, vars)
		}
	}
	if a, err := ParseValidate([]string{"-json"}); err != nil || a.ViewType != ViewJSON {
		t.Errorf("validate -json: %+v, %v", a, err)
	}
}

func TestParseFmt(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Fmt) bool
	}{
		{nil, "", func(a *Fmt) bool {
			return a.List && a.Write && !a.Diff && !a.Check && !a.Recursive && len(a.Paths) == 0
		}},
		// -check writes nothing.
		{[]string{"-check", "-diff", "-recursive", "a", "b"}, "", func(a *Fmt) bool {
			return a.Check && !a.Write && a.Diff && a.Recursive && strings.Join(a.Paths, " ") == "a b"
		}},
		{[]string{"-list=false", "-write=false", "-"}, "", func(a *Fmt) bool { return !a.List && !a.Write && a.Paths[0] == "-" }},
		{[]string{"-", "a.hcl"}, `"-" (stdin) cannot be combined with other paths`, nil},
		{[]string{"-check=x"}, `invalid boolean value "x" for -check`, nil},
	}
	for _, tt := range tests {
		a, err := ParseFmt(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}

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

func TestParseVersion(t *testing.T) {
	if a, err := ParseVersion([]string{"-no-color"}); err != nil || !a.NoColor {
		t.Errorf("version -no-color: %+v, %v", a, err)
	}
	_, err := ParseVersion([]string{"x"})
	wantError(t, []string{"x"}, err, "") // version ignores arguments, as it always did
	_, err = ParseVersion([]string{"-x"})
	wantError(t, []string{"-x"}, err, "flag provided but not defined: -x")
}

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
