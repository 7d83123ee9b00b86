package kindstest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/internal/steplab"
	"github.com/rayform/rayform/resources/stepenv"
)

// walkWork walks the steps of w (Steps) in the fake lab.
func walkWork(t *testing.T, env *stepenv.StepEnv, w *Work) ([]string, error) {
	t.Helper()
	return steplab.Walk(t, w, Steps(env, w))
}

// ---- vllm_serve ------------------------------------------------------------

// TestSecretsNeverOnCommandLines: secret env values and an API key reach
// the hosts only on stdin: never on a command line, never in a file
// (finding 8: a file can be left behind by kill -9).
func TestSecretsNeverOnCommandLines(t *testing.T) {
	const token, key = "hf_SECRETtokenVALUE", "sk-SECRETapiKEY"
	l := steplab.New(t, "spark1", "spark2")
	specs := steplab.PairSpecs("192.168.200.12")
	for i := range specs {
		specs[i].Env["HF_TOKEN"] = token
		specs[i].SecretEnv = []string{"HF_TOKEN"}
	}
	lines, err := walkWork(t, l.Env(), steplab.PairWork(plan.Create, specs, []string{"spark1", "spark2"}))
	if err != nil {
		t.Fatalf("cluster: %v\n%s", err, strings.Join(lines, "\n"))
	}
	sv := steplab.QwenServe()
	sv.Env = map[string]string{"VLLM_API_KEY": key, "HF_TOKEN": token}
	sv.SecretEnv = []string{"HF_TOKEN", "VLLM_API_KEY"}
	h := l.Hosts["spark1"]
	h.Serve.Chunks = steplab.QwenStartupLog()
	h.Models = steplab.QwenModels
	if lines, err := walkWork(t, l.Env(), steplab.QwenWork(plan.Create, sv, false)); err != nil {
		t.Fatalf("serve: %v\n%s", err, strings.Join(lines, "\n"))
	}
	runs, starts := 0, 0
	for _, c := range l.Calls() {
		if c.Upload {
			t.Errorf("upload %s: a secret file on the host", c.Path)
			continue
		}
		line := c.Cmd.String() + "\x00" + strings.Join(c.Cmd.Argv, "\x00")
		for _, s := range []string{token, key} {
			if strings.Contains(line, s) {
				t.Errorf("secret on a command line: %s", c.Line())
			}
		}
		// A cluster's container gets its secrets through docker exec's
		// stdin into its own tmpfs (issue 30, item 8: not as -e NAME,
		// which Docker keeps in its configuration), from the command's
		// environment, which the transport sends on stdin; the serve's
		// docker exec gets each as -e NAME and its value in its
		// environment.
		switch {
		case strings.Contains(c.Cmd.Script, "docker run -d ") && strings.Contains(c.Cmd.Script, `printf '%s=%s\n' HF_TOKEN "$HF_TOKEN"`) && c.Cmd.Env["HF_TOKEN"] == token:
			if strings.Contains(c.Cmd.Script, "-e HF_TOKEN") {
				t.Errorf("docker run passes HF_TOKEN into Docker's configuration: %s", c.Line())
			}
			runs++
		case slices.Contains(c.Cmd.Argv, "-d") && slices.Contains(c.Cmd.Argv, "VLLM_API_KEY") && c.Cmd.Env["VLLM_API_KEY"] == key && c.Cmd.Env["HF_TOKEN"] == token:
			starts++
		}
	}
	if runs != 2 {
		t.Errorf("%d docker runs handed HF_TOKEN from their environment to the container, want one per node", runs)
	}
	if starts != 1 {
		t.Errorf("%d serve starts took VLLM_API_KEY and HF_TOKEN from their environment, want 1", starts)
	}
}

// ---- destroy ---------------------------------------------------------------

func TestDestroyWork(t *testing.T) {
	specs := steplab.PairSpecs("192.168.200.12")
	container := func(s cluster.ContainerSpec, project string) observe.Container {
		return observe.Container{Name: s.Name, Labels: s.Labels(project), Running: true}
	}
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{
		"spark1": {Containers: observe.ContainerFacts{List: []observe.Container{container(specs[0], steplab.Project)}},
			Records: map[string]observe.ProcessRecord{"serve-qwen": {Found: true, Alive: true}}},
		"spark2": {Containers: observe.ContainerFacts{List: []observe.Container{
			container(specs[1], steplab.Project),
			// Another project's container, and a foreign one: never destroyed.
			{Name: "rayform-other", Labels: map[string]string{cluster.LabelManaged: "true", cluster.LabelProject: "else", cluster.LabelResource: "ray_cluster.other"}},
			{Name: "postgres", Labels: map[string]string{}},
		}}},
	}}
	st, err := state.New(steplab.Project)
	if err != nil {
		t.Fatal(err)
	}
	st.Set(steplab.Cluster, state.Resource{Type: "ray_cluster", Container: "rayform-main", Hosts: []state.Host{{Node: "spark1"}, {Node: "spark2"}}})
	st.Set("vllm_serve.qwen", state.Resource{Type: "vllm_serve", Container: "rayform-main", Hosts: []state.Host{{Node: "spark1"}}})
	st.Set("ray_cluster.gone", state.Resource{Type: "ray_cluster", Container: "rayform-gone", Hosts: []state.Host{{Node: "spark3"}}})

	res, g := DestroyWork(PlanInput{Facts: facts, State: st, Project: steplab.Project})
	got := map[string]string{}
	for addr, w := range res.Work {
		got[addr] = string(w.Action)
		if cluster.WorkOf(w) != nil {
			b, _ := json.Marshal(cluster.WorkOf(w).Remove)
			got[addr] += " " + string(b)
		}
	}
	want := map[string]string{
		steplab.Cluster:    `delete [{"Node":"spark1","Container":"rayform-main"},{"Node":"spark2","Container":"rayform-main"}]`,
		"vllm_serve.qwen":  "delete",
		"ray_cluster.gone": "no-op null",
	}
	if len(got) != len(want) {
		t.Errorf("work = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	order, err := g.TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	if indexIn(order, "vllm_serve.qwen") > indexIn(order, steplab.Cluster) {
		t.Errorf("order %v: the serve must stop before its cluster goes", order)
	}
	if c := res.Plan.Counts(); c.Destroy != 2 {
		t.Errorf("plan destroys %d, want 2", c.Destroy)
	}

	// Walking it removes exactly the project's containers.
	l := steplab.New(t, "spark1", "spark2")
	l.Run(specs...)
	l.Hosts["spark1"].Serve = steplab.Serve{Exists: true, Alive: true}
	l.Hosts["spark2"].Containers["postgres"] = &steplab.Container{Running: true}
	for _, addr := range order {
		if _, err := walkWork(t, l.Env(), res.Work[addr]); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
	}
	if l.Hosts["spark1"].Containers["rayform-main"] != nil || l.Hosts["spark2"].Containers["rayform-main"] != nil {
		t.Error("a project container survived destroy")
	}
	if l.Hosts["spark2"].Containers["postgres"] == nil {
		t.Error("destroy removed a container rayform did not create")
	}
	var _ *dag.Graph = g
}

func indexIn(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
