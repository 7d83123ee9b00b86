package kindstest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/internal/steplab"
)

// TestRemovedPlannedAsDestroyed: resources that left the configuration are
// planned as rayform destroy plans them (one planner of destruction): the
// same removals, found by their labels on every observed host (not only the
// hosts the state lists), and the same order, serves first (OrderDestroy),
// also for a serve whose cluster the state does not tell.
func TestRemovedPlannedAsDestroyed(t *testing.T) {
	specs := steplab.PairSpecs("192.168.200.12")
	container := func(s cluster.ContainerSpec) observe.Container {
		return observe.Container{Name: s.Name, Labels: s.Labels(steplab.Project), Running: true}
	}
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{
		"spark1": {Containers: observe.ContainerFacts{List: []observe.Container{container(specs[0])}},
			Records: map[string]observe.ProcessRecord{"serve-qwen": {Found: true, Alive: true}, "serve-other": {Found: true, Alive: true}}},
		"spark2": {Containers: observe.ContainerFacts{List: []observe.Container{container(specs[1]),
			{Name: "rayform-other", Labels: map[string]string{cluster.LabelManaged: "true", cluster.LabelProject: "else", cluster.LabelResource: steplab.Cluster}}}}},
	}}
	st, err := state.New(steplab.Project)
	if err != nil {
		t.Fatal(err)
	}
	// The state lists spark1 only: the worker on spark2 is found by its labels.
	st.Set(steplab.Cluster, state.Resource{Type: "ray_cluster", Container: "rayform-main", Hosts: []state.Host{{Node: "spark1"}}})
	st.Set("vllm_serve.qwen", state.Resource{Type: "vllm_serve", Container: "rayform-main", Hosts: []state.Host{{Node: "spark1"}}})
	st.Set("vllm_serve.other", state.Resource{Type: "vllm_serve", Container: "rayform-unknown", Hosts: []state.Host{{Node: "spark1"}}})
	empty, diags := LoadFiles(map[string][]byte{"main.hcl": nil}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in := PlanInput{Config: empty, Facts: facts, State: st, Project: steplab.Project}
	removed := Plan(in)
	destroyed, _ := DestroyWork(in)

	describe := func(w *Work) string {
		b, _ := json.Marshal(struct {
			Action plan.Action
			Hosts  []string
			Remove []cluster.Removal `json:",omitempty"`
			After  []string          `json:",omitempty"`
		}{w.Action, w.Hosts, removals(w), w.DestroyAfter})
		return string(b)
	}
	want := map[string]string{
		steplab.Cluster:    `{"Action":"delete","Hosts":["spark1","spark2"],"Remove":[{"Node":"spark1","Container":"rayform-main"},{"Node":"spark2","Container":"rayform-main"}],"After":["vllm_serve.other","vllm_serve.qwen"]}`,
		"vllm_serve.qwen":  `{"Action":"delete","Hosts":["spark1"]}`,
		"vllm_serve.other": `{"Action":"delete","Hosts":["spark1"]}`,
	}
	for name, res := range map[string]*Result{"plan of removed resources": removed, "destroy": destroyed} {
		if len(res.Work) != len(want) {
			t.Errorf("%s: %d works, want %d", name, len(res.Work), len(want))
		}
		for addr, w := range want {
			got := res.Work[addr]
			if got == nil {
				t.Errorf("%s: no work for %s", name, addr)
				continue
			}
			if d := describe(got); d != w {
				t.Errorf("%s: %s\ngot:  %s\nwant: %s", name, addr, d, w)
			}
		}
	}
	for _, ch := range removed.Plan.Changes {
		if !slices.Equal(ch.Reasons, []string{"not in the configuration any more"}) {
			t.Errorf("%s: reasons %q", ch.Address, ch.Reasons)
		}
	}

	// Apply's graph of the removed resources: the serves stop first.
	g := dag.New()
	for addr := range removed.Work {
		g.Add(addr)
	}
	run.OrderDestroy(g, removed.Work)
	order, err := g.TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	for _, sv := range []string{"vllm_serve.qwen", "vllm_serve.other"} {
		if indexIn(order, sv) > indexIn(order, steplab.Cluster) {
			t.Errorf("order %v: %s must stop before the cluster goes", order, sv)
		}
	}
}

func removals(w *Work) []cluster.Removal {
	if cluster.WorkOf(w) == nil {
		return nil
	}
	return cluster.WorkOf(w).Remove
}

// TestDestroyNamesUnreachableHosts: a host of a destroyed resource that
// could not be observed is named, as a warning of destroy's plan and in
// Unreached, which makes destroy fail and keep the resource (issue 22,
// item 5); what the reachable host holds is still removed.
func TestDestroyNamesUnreachableHosts(t *testing.T) {
	specs := steplab.PairSpecs("192.168.200.12")
	facts := &observe.Facts{
		Hosts: map[string]*observe.HostFacts{
			"spark1": {Complete: true, Containers: observe.ContainerFacts{List: []observe.Container{{Name: specs[0].Name, Labels: specs[0].Labels(steplab.Project), Running: true}}}},
			"spark2": {Err: "connect: no route to host"},
		},
		Errors: map[string]error{"spark2": errors.New("connect root@10.1.230.181:22: no route to host")},
	}
	st, err := state.New(steplab.Project)
	if err != nil {
		t.Fatal(err)
	}
	st.Set(steplab.Cluster, state.Resource{Type: "ray_cluster", Container: "rayform-main", Hosts: []state.Host{{Node: "spark1"}, {Node: "spark2"}}})
	empty, diags := LoadFiles(map[string][]byte{"main.hcl": nil}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	res, _ := DestroyWork(PlanInput{Config: empty, Facts: facts, State: st, Project: steplab.Project})
	if got := removals(res.Work[steplab.Cluster]); len(got) != 1 || got[0].Node != "spark1" {
		t.Errorf("removals %v, want spark1's container only", got)
	}
	un := run.Unreached(facts, res.Work)
	if len(un) != 1 || un[0].Address != steplab.Cluster || un[0].Node != "spark2" || !strings.Contains(un[0].Why, "no route to host") {
		t.Fatalf("Unreached = %+v, want %s on spark2 with its cause", un, steplab.Cluster)
	}
	var warned bool
	for _, f := range res.Plan.Findings {
		warned = warned || f.Severity == plan.Warning && f.Host == "spark2" && strings.Contains(f.Summary, "cannot reach spark2")
	}
	if !warned {
		t.Errorf("destroy's plan does not warn of spark2: %+v", res.Plan.Findings)
	}
}
