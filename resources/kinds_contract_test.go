package resources_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/kind"
)

// TestKindRegistry: each registered kind is found by its block type and by
// the addresses of its blocks, its schema is what configurations are
// loaded with, and its traits are what the CLI asks of an address.
func TestKindRegistry(t *testing.T) {
	seen := map[string]bool{}
	schemas := resources.Schemas()
	for i, k := range resources.Kinds() {
		typ := k.Schema().Type
		if seen[typ] {
			t.Errorf("kind %s registered twice", typ)
		}
		seen[typ] = true
		if schemas[i].Type != typ {
			t.Errorf("Schemas()[%d] is %s, want %s", i, schemas[i].Type, typ)
		}
		if resources.KindOf(typ) == nil || resources.KindAt(typ+".x").Schema().Type != typ {
			t.Errorf("kind %s not found by its type or address", typ)
		}
	}
	if resources.KindOf("dns") != nil || resources.KindAt("dns.x") != nil {
		t.Error("an unregistered type has a kind")
	}
	for _, tt := range []struct {
		name string
		has  func(kind.Traits) bool
		want []string
	}{
		{"replaceable", func(t kind.Traits) bool { return t.Replaceable }, []string{resources.KindCluster, resources.KindServe}},
		{"logs", func(t kind.Traits) bool { return t.Logs }, []string{resources.KindCluster, resources.KindServe}},
	} {
		if got := resources.TypesWith(tt.has); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if _, err := resources.KindOf(resources.KindNode).Logs(kind.LogQuery{Address: "node.a"}); !errors.Is(err, kind.ErrNoLogs) {
		t.Errorf("node logs: %v, want ErrNoLogs", err)
	}
}

// TestStepsOfUnregisteredKind: work of a type no kind is registered for
// is not skipped silently; its one step fails, naming it.
func TestStepsOfUnregisteredKind(t *testing.T) {
	w := &resources.Work{Address: "dns.a", Type: "dns", Action: plan.Create}
	steps := resources.Steps(&resources.StepEnv{}, w)
	if len(steps) != 1 {
		t.Fatalf("%d steps, want 1", len(steps))
	}
	err := steps[0].Run(context.Background(), func(string) {})
	if err == nil || !strings.Contains(err.Error(), `"dns"`) {
		t.Errorf("step error %v, want one naming the type", err)
	}
	if len(resources.PrepareSteps(&resources.StepEnv{}, w)) != 0 {
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
		return resources.KindAt(addr).Logs(q)
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
