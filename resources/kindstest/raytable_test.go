package kindstest

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
)

// TestPlanAndVerifyJudgeRayTableAlike gives plan and apply's verification
// the same Ray node table of a converged cluster, altered, and checks that
// both reject it for the same reasons: a table verify rejects never plans
// as "No changes".
func TestPlanAndVerifyJudgeRayTableAlike(t *testing.T) {
	tests := []struct {
		name  string
		alter func(rows []cluster.RayNode) []cluster.RayNode
		// want are the reasons both must give.
		want []string
		// action is what the plan does to the cluster.
		action plan.Action
	}{
		{name: "as declared", alter: func(r []cluster.RayNode) []cluster.RayNode { return r }, action: plan.NoOp},
		{name: "head GPUs missing", alter: func(r []cluster.RayNode) []cluster.RayNode {
			r[0].Resources = map[string]float64{"CPU": 224}
			return r
		}, want: []string{`gpu["h1"] (192.168.0.10) has 0 GPUs in Ray, want 8`}, action: plan.Replace},
		{name: "duplicate node", alter: func(r []cluster.RayNode) []cluster.RayNode {
			dup := r[1]
			dup.NodeID = "another"
			return append(r, dup)
		}, want: []string{`gpu["h2"] (192.168.0.11) is ALIVE 2 times`}, action: plan.Update},
		{name: "undeclared ALIVE node", alter: func(r []cluster.RayNode) []cluster.RayNode {
			return append(r, cluster.RayNode{NodeID: "stranger", NodeIP: "192.168.0.99", State: "ALIVE", Resources: map[string]float64{"GPU": 8}})
		}, want: []string{"192.168.0.99 is ALIVE as a worker but is no declared node's fabric address"}, action: plan.NoOp},
		{name: "worker under the management IP", alter: func(r []cluster.RayNode) []cluster.RayNode {
			r[1].NodeIP = "10.1.230.11"
			return r
		}, want: []string{`gpu["h2"] (192.168.0.11) is not ALIVE in Ray's node table`, "10.1.230.11 is ALIVE as a worker but is no declared node's fabric address"},
			action: plan.Update},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := convergedCluster(t, 3)
			cfg, diags := cc.loaded.WithFacts(Facts{FabricAddrs: cc.addrs})
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			rc := cfg.RayClusters["main"]
			head := cc.facts.Hosts[rc.Head]
			table := rayTable(head, benchDashPort)
			table.List = tt.alter(table.List)
			setRayTable(head, benchDashPort, table)

			// Verify, on the table as apply reads it.
			ifaces := map[string]string{}
			for n := range cc.addrs {
				ifaces[n] = "ib0"
			}
			verr := VerifyRayTable(t, cluster.ClusterSpecs(cluster.View(cfg.Config), rc, cc.addrs, ifaces), rayTable(head, benchDashPort).List)
			// Plan, on the table as observe reports it.
			p := Plan(PlanInput{Config: cfg, Facts: cc.facts, Project: benchProject}).Plan
			var said []string
			for _, d := range p.Drift {
				said = append(said, d.Summary)
			}
			for _, f := range p.Findings {
				said = append(said, f.Summary)
			}
			planSays := strings.Join(said, "\n")

			if len(tt.want) == 0 {
				if verr != nil {
					t.Errorf("verify rejects the declared table: %v", verr)
				}
				if p.HasChanges() || len(p.Errors()) > 0 {
					t.Errorf("plan is not empty on the declared table: %s", planSays)
				}
				return
			}
			if verr == nil {
				t.Fatal("verify accepts the table")
			}
			if !p.HasChanges() && len(p.Errors()) == 0 {
				t.Fatal(`verify rejects the table but the plan says "No changes"`)
			}
			for _, w := range tt.want {
				if !strings.Contains(verr.Error(), w) {
					t.Errorf("verify does not say %q:\n%v", w, verr)
				}
				if !strings.Contains(planSays, w) {
					t.Errorf("plan does not say %q:\n%s", w, planSays)
				}
			}
			for _, ch := range p.Changes {
				if ch.Address == rc.Addr && ch.Action != tt.action {
					t.Errorf("plan %s %s, want %s", ch.Action, ch.Address, tt.action)
				}
			}
		})
	}
}
