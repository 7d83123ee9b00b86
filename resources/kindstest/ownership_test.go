package kindstest

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/internal/steplab"
)

// Issue 23, item 5: docker_args cannot set rayform's labels (a container
// labelled with another project was created and orphaned); validate
// refuses them at the argument's file:line.
func TestDockerArgsCannotSetRayformLabels(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		summary    string // "" when the arguments pass
	}{
		{"--label KEY=VALUE", `["--label", "rayform.project=other"]`, "Label managed by rayform"},
		{"--label=", `["--label=rayform.resource=ray_cluster.x"]`, "Label managed by rayform"},
		{"-l", `["-l", "rayform.managed=false"]`, "Label managed by rayform"},
		{"-l=", `["-l=rayform.project=other"]`, "Label managed by rayform"},
		{"-lVALUE", `["-lrayform.project=other"]`, "Label managed by rayform"},
		{"-l in a cluster", `["-tl", "rayform.spec-hash=x"]`, "Label managed by rayform"},
		{"key in capitals", `["--label", "Rayform.Project=other"]`, "Label managed by rayform"},
		{"key alone", `["--label", "rayform.project"]`, "Label managed by rayform"},
		{"--label-file", `["--label-file", "/etc/labels"]`, "Label file refused"},
		{"--label-file=", `["--label-file=/etc/labels"]`, "Label file refused"},
		{"own label", `["--label", "team=infer", "-l", "owner=me"]`, ""},
		{"the value of another option", `["-e", "--label=rayform.x"]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(kindsBase, `container_name = "ray-main"`, "container_name = \"ray-main\"\n  docker_args    = "+tc.args, 1)
			_, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: ".", Kinds: Schemas()})
			var found *hcl.Diagnostic
			for _, d := range diags {
				if d.Severity == hcl.DiagError && strings.HasPrefix(d.Summary, "Label") {
					found = d
				}
			}
			switch {
			case tc.summary == "" && found != nil:
				t.Fatalf("refused: %v", found)
			case tc.summary == "":
			case found == nil || found.Summary != tc.summary:
				t.Fatalf("no %q; diagnostics: %v", tc.summary, diags)
			case found.Subject == nil || found.Subject.Filename != "main.hcl" || found.Subject.Start.Line != 23:
				t.Fatalf("diagnostic at %v, want main.hcl:23", found.Subject)
			}
		})
	}
}

// Issue 23, item 4: a state entry naming a container rayform did not create
// (vllm_serve.ghost in "victim") makes plan and destroy refuse, naming it,
// and plans no work inside it.
func TestForgedServeContainerRefused(t *testing.T) {
	specs := steplab.PairSpecs("192.168.200.12")
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{
		"spark1": {Containers: observe.ContainerFacts{List: []observe.Container{
			{Name: specs[0].Name, Labels: specs[0].Labels(steplab.Project), Running: true},
			{Name: "victim", Labels: map[string]string{"app": "db"}, Running: true},
			{Name: "neighbour", Labels: map[string]string{cluster.LabelManaged: "true", cluster.LabelProject: "other", cluster.LabelResource: steplab.Cluster}, Running: true},
		}}, Records: map[string]observe.ProcessRecord{"serve-ghost": {Found: true, Alive: true}, "serve-ghost2": {Found: true, Alive: true}, "serve-qwen": {Found: true, Alive: true}}},
	}}
	st, err := state.New(steplab.Project)
	if err != nil {
		t.Fatal(err)
	}
	st.Set("vllm_serve.ghost", state.Resource{Type: "vllm_serve", Container: "victim", Hosts: []state.Host{{Node: "spark1", Host: "h"}}})
	st.Set("vllm_serve.ghost2", state.Resource{Type: "vllm_serve", Container: "neighbour", Hosts: []state.Host{{Node: "spark1", Host: "h"}}})
	st.Set("vllm_serve.qwen", state.Resource{Type: "vllm_serve", Container: specs[0].Name, Hosts: []state.Host{{Node: "spark1", Host: "h"}}})
	empty, diags := LoadFiles(map[string][]byte{"main.hcl": nil}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in := PlanInput{Config: empty, Facts: facts, State: st, Project: steplab.Project}
	destroyed, _ := DestroyWork(in)
	for name, res := range map[string]*Result{"plan": Plan(in), "destroy": destroyed} {
		for _, ghost := range []string{"vllm_serve.ghost", "vllm_serve.ghost2"} {
			if w := res.Work[ghost]; w != nil {
				t.Errorf("%s: work planned for %s in a container rayform did not create: %+v", name, ghost, w)
			}
			found := false
			for _, f := range res.Plan.Errors() {
				if f.Address == ghost && f.Host == "spark1" && strings.Contains(f.Summary, "which rayform did not create") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no error for %s; findings %+v", name, ghost, res.Plan.Findings)
			}
		}
		if w := res.Work["vllm_serve.qwen"]; w == nil || w.Action != plan.Delete {
			t.Errorf("%s: the project's own serve is not destroyed: %+v", name, w)
		}
	}
}
