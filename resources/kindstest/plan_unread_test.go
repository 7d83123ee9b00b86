package kindstest

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
)

// TestPlanUnreadRayTable: a converged cluster whose head answers Ray's
// node table slowly, too large, malformed or not at all in the probe's
// output: the table could not be read, which says nothing of the cluster.
// Plan warns that it could not read it and replaces nothing (issue 38
// item 6: a dashboard answering /api/v0/nodes 2.5 s late, or with
// malformed JSON, made plan replace the Ray cluster and the healthy
// serve). Nothing listening on the dashboard's port, in a running head
// container, is Ray's own answer (Ray is down): still a replacement.
func TestPlanUnreadRayTable(t *testing.T) {
	url := cluster.RayTableURL(benchDashPort)
	tests := []struct {
		name    string
		answer  *observe.HTTPResult // nil: no answer in the probe's output
		replace bool
		want    string
	}{
		{name: "answered 2.5 s late",
			answer: &observe.HTTPResult{Via: "curl", HTTPCheck: observe.HTTPCheck{TimedOut: true,
				Err: "curl: (28) Operation timed out after 2001 milliseconds with 0 bytes received"}},
			want: "Ray's node table on gpu[\"h1\"] could not be read"},
		{name: "timed out inside the body",
			answer: &observe.HTTPResult{Via: "curl", HTTPCheck: observe.HTTPCheck{Status: 200, TimedOut: true,
				Err: "curl: (28) Operation timed out after 2000 milliseconds with 1024 bytes received"}},
			want: "Ray's node table on gpu[\"h1\"] could not be read"},
		{name: "malformed JSON",
			answer: &observe.HTTPResult{Via: "curl", HTTPCheck: observe.HTTPCheck{Status: 200},
				Body: `{"result": true, "data": {"result": {"result": [{"node_id": "ab`},
			want: "not the JSON Ray writes"},
		{name: "not JSON at all",
			answer: &observe.HTTPResult{Via: "curl", HTTPCheck: observe.HTTPCheck{Status: 200}, Body: "<html>gateway</html>"},
			want:   "not the JSON Ray writes"},
		{name: "larger than the probe reads",
			answer: &observe.HTTPResult{Via: "curl", HTTPCheck: observe.HTTPCheck{Status: 200, Oversized: true,
				Err: "the answer is larger than 4194304 bytes: not read"}},
			want: "larger than 4194304 bytes"},
		{name: "ray list nodes printed no JSON",
			answer: &observe.HTTPResult{Via: "exec", HTTPCheck: observe.HTTPCheck{Status: 200}, Body: "2026-12-06 INFO something\n"},
			want:   "could not be read"},
		{name: "missing from the probe's output",
			want: "could not be read"},
		{name: "nothing listens: Ray is down",
			answer:  &observe.HTTPResult{Via: "curl", HTTPCheck: observe.HTTPCheck{Refused: true, Err: "connection refused"}},
			replace: true, want: "Ray does not answer on gpu[\"h1\"]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := convergedCluster(t, 3)
			head := cc.facts.Hosts[`gpu["h1"]`]
			delete(head.HTTP, url)
			if tt.answer != nil {
				head.HTTP[url] = *tt.answer
			}
			st, err := state.New(benchProject)
			if err != nil {
				t.Fatal(err)
			}
			cfg := planConfig(t, string(benchConfig(3)), cc.facts)
			res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject})
			var txt strings.Builder
			if err := plan.RenderText(&txt, res.Plan, plan.TextOptions{}); err != nil {
				t.Fatal(err)
			}
			want := map[string]plan.Action{"ray_cluster.main": plan.NoOp, "vllm_serve.llama": plan.NoOp}
			if tt.replace {
				want = map[string]plan.Action{"ray_cluster.main": plan.Replace, "vllm_serve.llama": plan.Replace}
			}
			for _, ch := range res.Plan.Changes {
				if w, ok := want[ch.Address]; ok && ch.Action != w {
					t.Errorf("%s: %s, want %s (%v)", ch.Address, ch.Action, w, ch.Reasons)
				}
			}
			if !tt.replace && len(res.Plan.Drift) > 0 {
				t.Errorf("drift from a reading that could not be read: %+v", res.Plan.Drift)
			}
			if !strings.Contains(txt.String(), tt.want) {
				t.Errorf("plan lacks %q\n%s", tt.want, txt.String())
			}
			if n := len(res.Plan.Errors()); n != 0 {
				t.Errorf("%d error findings: %+v", n, res.Plan.Findings)
			}
		})
	}
}
