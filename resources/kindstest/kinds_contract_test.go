package kindstest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/resourcestest"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/stepenv"
)

// TestKindRegistry: each registered kind is found by its block type and by
// the addresses of its blocks, its schema is what configurations are
// loaded with, and its traits are what the CLI asks of an address.
func TestKindRegistry(t *testing.T) {
	seen := map[string]bool{}
	schemas := Schemas()
	for i, k := range Kinds() {
		typ := k.Schema().Type
		if seen[typ] {
			t.Errorf("kind %s registered twice", typ)
		}
		seen[typ] = true
		if schemas[i].Type != typ {
			t.Errorf("Schemas()[%d] is %s, want %s", i, schemas[i].Type, typ)
		}
		if KindOf(typ) == nil || KindAt(typ+".x").Schema().Type != typ {
			t.Errorf("kind %s not found by its type or address", typ)
		}
	}
	if KindOf("dns") != nil || KindAt("dns.x") != nil {
		t.Error("an unregistered type has a kind")
	}
	for _, tt := range []struct {
		name string
		has  func(kind.Kind) bool
		want []string
	}{
		{"replaceable", func(k kind.Kind) bool { return k.Traits().Replaceable }, []string{KindCluster, KindServe}},
		{"logs", kind.HasLogs, []string{KindCluster, KindServe}},
	} {
		if got := Kinds().TypesWith(tt.has); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if _, err := run.Logs(Kinds(), kind.LogQuery{Address: "node.a"}); err == nil || !strings.Contains(err.Error(), "logs takes a ray_cluster.NAME or vllm_serve.NAME address") {
		t.Errorf("node logs: %v, want the addresses logs takes", err)
	}
	for name, got := range map[string]int{
		"observe": len(kind.With[kind.KindWithObserve](Kinds())),
		"steps":   len(kind.With[kind.KindWithSteps](Kinds())),
		"prepare": len(kind.With[kind.KindWithPrepare](Kinds())),
		"status":  len(kind.With[kind.KindWithStatus](Kinds())),
		"locks":   len(kind.With[kind.KindWithLocks](Kinds())),
	} {
		want := map[string]int{"observe": 3, "steps": 2, "prepare": 2, "status": 3, "locks": 1}[name]
		if got != want {
			t.Errorf("%d kinds with %s, want %d", got, name, want)
		}
	}
}

// TestStepsOfUnregisteredKind: work of a type no kind is registered for
// is not skipped silently; its one step fails, naming it.
func TestStepsOfUnregisteredKind(t *testing.T) {
	w := &Work{Address: "dns.a", Type: "dns", Action: plan.Create}
	steps := Steps(&stepenv.StepEnv{}, w)
	if len(steps) != 1 {
		t.Fatalf("%d steps, want 1", len(steps))
	}
	err := steps[0].Run(context.Background(), func(string) {})
	if err == nil || !strings.Contains(err.Error(), `"dns"`) {
		t.Errorf("step error %v, want one naming the type", err)
	}
	if len(PrepareSteps(&stepenv.StepEnv{}, w)) != 0 {
		t.Error("prepare steps for an unregistered kind")
	}
}

// TestKindLogs: the logs of a cluster are its containers' on every node
// (or one), those of a serve its log file on the head; each kind refuses
// what does not apply to it.
func TestKindLogs(t *testing.T) {
	cc := convergedCluster(t, 2)
	cfg := planConfig(t, twoServesConfig(), cc.facts)
	q := kind.LogQuery{Config: cfg.Config, Project: "p", Tail: 10}
	logs := func(addr, node, since string) ([]kind.LogCommand, error) {
		q := q
		q.Address, q.Node, q.Since = addr, node, since
		return run.Logs(Kinds(), q)
	}
	rc := cfg.RayClusters["main"]
	cmds, err := logs(rc.Addr, "", "10m")
	if err != nil || len(cmds) != len(rc.Nodes()) {
		t.Fatalf("cluster logs: %v, %v", cmds, err)
	}
	for i, c := range cmds {
		if c.Node != rc.Nodes()[i] || !strings.Contains(c.Script, "docker logs --tail 10 --since 10m "+rc.ContainerName) {
			t.Errorf("cluster log %d: %+v", i, c)
		}
	}
	if _, err := logs(rc.Addr, "elsewhere", ""); err == nil {
		t.Error("cluster logs of a node not in it")
	}
	cmds, err = logs("vllm_serve.small", "", "")
	if err != nil || len(cmds) != 1 || cmds[0].Node != rc.Head || !strings.Contains(cmds[0].Script, "tail -n 10") || !strings.Contains(cmds[0].Script, "serve-small.log") {
		t.Errorf("serve logs: %+v, %v", cmds, err)
	}
	if _, err := logs("vllm_serve.small", "", "10m"); err == nil {
		t.Error("serve logs accepted -since")
	}
	if _, err := logs("vllm_serve.nope", "", ""); err == nil {
		t.Error("logs of a serve not in the configuration")
	}
}

// TestDockerCheckedOnClusterNodes: the cluster kind, which runs the
// containers, checks that docker is usable on each of its nodes (the node
// kind checks only reachability and GPUs); the finding names the node.
func TestDockerCheckedOnClusterNodes(t *testing.T) {
	cc := convergedCluster(t, 2)
	cfg := planConfig(t, string(benchConfig(2)), cc.facts)
	worker := cfg.RayClusters["main"].Workers[0]
	cc.facts.Hosts[worker].Docker = observe.Docker{Err: "permission denied while trying to connect to the Docker daemon socket"}
	res := Plan(PlanInput{Config: cfg, Facts: cc.facts, Project: benchProject})
	var got []plan.Finding
	for _, f := range res.Plan.Findings {
		if strings.HasPrefix(f.Summary, "docker is not usable") {
			got = append(got, f)
		}
	}
	if len(got) != 1 || got[0].Host != worker || got[0].Address != cfg.Nodes[worker].Addr || got[0].Severity != plan.Error {
		t.Errorf("docker findings %+v, want one error for %s", got, worker)
	}
}

// TestServeStopsAheadOfItsCluster: a serve replaced along with its
// cluster's containers is stopped ahead of the walk, as a node the
// cluster waits for; not when its cluster is left alone, nor when the
// serve itself has no steps.
func TestServeStopsAheadOfItsCluster(t *testing.T) {
	serveWork := func(action plan.Action) *Work {
		return &Work{Address: "vllm_serve.q", Type: KindServe, Action: action, Hosts: []string{"h1"},
			Do: &serve.ServeWork{Spec: serve.ServeSpec{Name: "q", Container: "rayform-main", Node: "h1"}, Stop: true, Start: true, Cluster: "ray_cluster.main"}}
	}
	cluster := func(action plan.Action) *Work {
		return &Work{Address: "ray_cluster.main", Type: KindCluster, Action: action, Do: &cluster.ClusterWork{Name: "main"}}
	}
	some := []apply.Step{apply.Func{Label: "x"}}
	env := &kind.Env{}
	for _, tt := range []struct {
		name          string
		serve, clustr plan.Action
		steps         []apply.Step
		want          int
	}{
		{"replaced with its cluster", plan.Replace, plan.Update, some, 1},
		{"cluster unchanged", plan.Replace, plan.NoOp, some, 0},
		{"serve created", plan.Create, plan.Update, some, 0},
		{"serve without steps", plan.Replace, plan.Update, nil, 0},
	} {
		ws := map[string]*Work{"vllm_serve.q": serveWork(tt.serve), "ray_cluster.main": cluster(tt.clustr)}
		steps := map[string][]apply.Step{"vllm_serve.q": tt.steps}
		var got []kind.EarlySteps
		for _, k := range kind.With[kind.KindWithEarlySteps](Kinds()) {
			got = append(got, k.EarlySteps(kind.EarlyStepsRequest{Env: env, Work: ws, Steps: steps})...)
		}
		if len(got) != tt.want {
			t.Errorf("%s: %d ahead, want %d", tt.name, len(got), tt.want)
			continue
		}
		if tt.want == 1 && (got[0].Node != "vllm_serve.q#stop" || got[0].Before != "ray_cluster.main" || got[0].Address != "vllm_serve.q" || len(got[0].Steps) == 0) {
			t.Errorf("%s: %+v", tt.name, got[0])
		}
	}
}

// TestRemovedServeOrdersOnlyRemovals: a serve that left the configuration
// is stopped, and its stop orders only other removals: the cluster it ran
// on, still configured and changed by the plan, is not made to wait for it
// (destroy's order binds the resources being destroyed, not the others).
func TestRemovedServeOrdersOnlyRemovals(t *testing.T) {
	cc := convergedCluster(t, 2)
	cfg := planConfig(t, string(benchConfig(2)), cc.facts)
	rc := cfg.RayClusters["main"]
	// The worker's container is gone: the cluster is updated.
	cc.facts.Hosts[rc.Workers[0]].Containers.List = nil
	head := cc.facts.Hosts[rc.Head]
	head.Records["serve-gone"] = observe.ProcessRecord{Found: true, Alive: true}
	st, err := state.New(benchProject)
	if err != nil {
		t.Fatal(err)
	}
	st.Set("vllm_serve.gone", state.Resource{Type: KindServe, Container: rc.ContainerName, Hosts: []state.Host{{Node: rc.Head}}})
	res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject})
	gone, cluster := res.Work["vllm_serve.gone"], res.Work[rc.Addr]
	if gone == nil || gone.Action != plan.Delete {
		t.Fatalf("removed serve: %+v", gone)
	}
	if cluster == nil || cluster.Action != plan.Update {
		t.Fatalf("cluster: %+v", cluster)
	}
	if len(cluster.DestroyAfter) != 0 || len(gone.DestroyAfter) != 0 {
		t.Errorf("destroy order on a kept resource: cluster after %v, serve after %v", cluster.DestroyAfter, gone.DestroyAfter)
	}
}

// TestFingerprintReadsRayTableRows: a saved plan commits to Ray's node
// table by its rows (the cluster kind's Fingerprint): a node that turned
// DEAD changes the head's fingerprint, nothing else does.
func TestFingerprintReadsRayTableRows(t *testing.T) {
	cc := convergedCluster(t, 2)
	cfg := planConfig(t, string(benchConfig(2)), cc.facts)
	rc := cfg.RayClusters["main"]
	before := run.HostFingerprints(Kinds(), cc.facts)
	if again := run.HostFingerprints(Kinds(), cc.facts); !maps.Equal(before, again) {
		t.Fatalf("fingerprints differ for the same facts: %v, %v", before, again)
	}
	head := cc.facts.Hosts[rc.Head]
	table := cluster.RayTable(head, rc)
	if len(table.List) < 2 {
		t.Fatalf("node table %+v", table)
	}
	table.List[1].State = "DEAD"
	resourcestest.SetRayTable(head, rc.DashboardPort, table)
	after := run.HostFingerprints(Kinds(), cc.facts)
	if after[rc.Head] == before[rc.Head] {
		t.Error("a DEAD Ray node left the head's fingerprint unchanged")
	}
	for _, n := range rc.Workers {
		if after[n] != before[n] {
			t.Errorf("%s's fingerprint changed with the head's table", n)
		}
	}
}
