package command

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources"
)

// TestCommandFlagsTerraformStyle checks the habits a Terraform user brings:
// -no-color after the command, -input=false, and a suggestion for a
// mistyped command.
func TestCommandFlagsTerraformStyle(t *testing.T) {
	pair := "examples/dgx-spark-pair"
	tests := []struct {
		name       string
		dir        string
		args       []string
		wantCode   int
		wantStderr []string
		notStderr  []string
	}{
		{"mistyped command", pair, []string{"plna"}, ExitError, []string{`unknown command "plna". Did you mean "plan"?`}, nil},
		{"mistyped destroy", pair, []string{"destory"}, ExitError, []string{`Did you mean "destroy"?`}, nil},
		{"nothing close", pair, []string{"frobnicate"}, ExitError, []string{`unknown command "frobnicate"`}, []string{"Did you mean"}},
		{"graph -no-color", pair, []string{"graph", "-no-color"}, ExitOK, nil, []string{"flag provided but not defined"}},
		{"apply -input=false without approval", pair, []string{"apply", "-input=false"}, ExitError,
			[]string{"Plan file or auto-approve required", "-input=false is set"}, []string{"flag provided but not defined"}},
		{"destroy -input=false without approval", pair, []string{"destroy", "-input=false", "-no-color"}, ExitError,
			[]string{"-auto-approve required", "-input=false is set"}, nil},
		// Checking tolerates missing values; planning does not.
		{"graph without values", "testdata/config/cli/secrets-required", []string{"graph"}, ExitOK, nil, nil},
		{"plan without values", "testdata/config/cli/secrets-required", []string{"plan", "-no-color", "-input=false"}, ExitError,
			[]string{"No value for required variable"}, []string{"flag provided but not defined"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runIn(t, repoPath(t, tt.dir), tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			for _, w := range tt.notStderr {
				if strings.Contains(r.stderr, w) {
					t.Errorf("stderr has %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

// TestNoColorAfterCommand checks that -no-color after the command turns
// colour off, as the global form does.
func TestNoColorAfterCommand(t *testing.T) {
	var out, errb bytes.Buffer
	m := &Meta{View: views.NewView(&out, &errb)}
	m.View.SetColor(true)
	if code := runVersion(context.Background(), m, []string{"-no-color"}); code != ExitOK {
		t.Fatalf("version -no-color: exit %d, stderr %q", code, errb.String())
	}
	if m.View.Color() {
		t.Error("-no-color after the command left colour on")
	}
}

// TestProjectIdentity checks where the project name comes from: the flag,
// the configuration's rayform block, the state's record, and only last the
// directory's name; and that a declared name contradicting the applied
// state is refused.
func TestProjectIdentity(t *testing.T) {
	load := func(t *testing.T, src string) *config.Config {
		t.Helper()
		cfg, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src + "\nnode \"a\" {\n  host = \"h\"\n}\n")}, config.Options{Kinds: resources.Kinds().Schemas()})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cfg
	}
	declared := load(t, "rayform {\n  project = \"gx\"\n}\n")
	undeclared := load(t, "")
	applied := func(project string) *state.State {
		st, _ := state.New(project)
		st.Set("ray_cluster.c", state.Resource{Type: "ray_cluster", Hosts: []state.Host{{Node: "a", Host: "h"}}})
		return st
	}
	empty, _ := state.New("")
	dir := filepath.Join(t.TempDir(), "checkout-b")
	tests := []struct {
		name, flag string
		cfg        *config.Config
		st         *state.State
		want       string
		wantErr    string
	}{
		{"declared", "", declared, empty, "gx", ""},
		{"declared, another checkout with its state", "", declared, applied("gx"), "gx", ""},
		{"declared contradicts the applied state", "", declared, applied("checkout-a"), "", `applied as project "checkout-a"`},
		{"flag wins", "other", declared, applied("gx"), "other", ""},
		{"invalid flag", "a b", declared, empty, "", "-project"},
		{"undeclared, recorded by the state", "", undeclared, applied("checkout-a"), "checkout-a", ""},
		{"undeclared, no state: the directory", "", undeclared, empty, "checkout-b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveProject(dir, tt.flag, tt.cfg, tt.st)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestDestroyTargetKeepsDependencies checks Terraform's destroy -target:
// the target and what depends on it, never what it depends on. Destroying
// the serve leaves its Ray cluster; destroying the cluster takes its serve.
func TestDestroyTargetKeepsDependencies(t *testing.T) {
	cfg, diags := config.Load(repoPath(t, "examples/dgx-spark-pair"), config.Options{Kinds: resources.Kinds().Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	tests := []struct {
		targets []string
		want    []string
	}{
		{nil, []string{"ray_cluster.spark", "vllm_serve.qwen"}},
		{[]string{"vllm_serve.qwen"}, []string{"vllm_serve.qwen"}},
		{[]string{"ray_cluster.spark"}, []string{"ray_cluster.spark", "vllm_serve.qwen"}},
		{[]string{"node.spark2"}, []string{"ray_cluster.spark", "vllm_serve.qwen"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.targets, ","), func(t *testing.T) {
			st, _ := state.New("p")
			r := &run.Runner{Kinds: resources.Kinds(), State: st, Project: "p", Options: run.Options{Targets: tt.targets}}
			obs := &run.Observation{Config: cfg}
			r.DestroyPlan(obs)
			var got []string
			for _, ch := range obs.Result.Plan.Changes {
				got = append(got, ch.Address)
				if _, ok := obs.Result.Work[ch.Address]; !ok {
					t.Errorf("%s planned without work", ch.Address)
				}
			}
			if len(obs.Result.Work) != len(got) || strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("destroys %v (work for %d), want %v", got, len(obs.Result.Work), tt.want)
			}
		})
	}
}

// TestProjectFromDir: a directory name that already makes a project is the
// project it always was (containers found by it stay this deployment's);
// any other gives a valid project name of its own.
func TestProjectFromDir(t *testing.T) {
	tests := []struct{ dir, want string }{
		{"dgx-spark-pair", "dgx-spark-pair"},
		{"checkout-b", "checkout-b"},
		{"Pair_2.v1", "Pair_2.v1"},
		{"proj.", "proj"},
		{"-x-", "x"},
		{"_lab", "lab"},
		{"...", "rayform"},
		{"my project", "my_project-dff9bd4a"},
		{"my_project", "my_project"},
		{"été", "t__-bd010c64"},
	}
	for _, tt := range tests {
		got := projectFromDir(tt.dir)
		if got != tt.want {
			t.Errorf("projectFromDir(%q) = %q, want %q", tt.dir, got, tt.want)
		}
		if !config.ValidProject(got) {
			t.Errorf("projectFromDir(%q) = %q is not a valid project", tt.dir, got)
		}
	}
}
