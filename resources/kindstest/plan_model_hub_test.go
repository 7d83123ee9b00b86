package kindstest

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/serve"
)

// closedEndpoint is the URL of a port on 127.0.0.1 that nothing listens
// on: a hub that does not answer (connection refused).
func closedEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// recordJSON is the manifest an apply records on a node once its copy is
// verified: model.RecordFile(cache_dir, source, revision).
func recordJSON(t *testing.T, mf model.Manifest, at time.Time) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"version": 1, "repo": mf.Repo, "revision": mf.Revision, "commit": mf.Commit,
		"files": mf.Files, "endpoint": "https://huggingface.co", "recorded_at": at.Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPlanModelHubUnreachable: the hub does not answer (a closed port),
// every node holds a complete copy and the manifest an earlier apply
// recorded next to it. plan judges the nodes against the newest record,
// has nothing to do (the serve keeps running the recorded commit) and
// warns, naming the hub, the cause and where and when the list was
// recorded. Without a record on any node the hub's silence stays an
// error, with its cause and fix.
func TestPlanModelHubUnreachable(t *testing.T) {
	fixed := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	mf := modelManifest()
	dir := "/data/hf/hub/" + model.CacheDirName(mf.Repo)
	record := dir + "/.rayform/manifests/main.json"
	endpoint := closedEndpoint(t)
	src := strings.Replace(modelConfig(), "token     = var.hf_token", "token     = var.hf_token\n  endpoint  = \""+endpoint+"\"", 1)
	all := func(model.File) bool { return true }
	older := mf
	older.Commit = strings.Repeat("9", 40)
	for _, tc := range []struct {
		name    string
		records map[string]string
		errors  int
		want    []string
	}{
		{name: "model-hub-unreachable",
			records: map[string]string{`gpu["h1"]`: recordJSON(t, mf, fixed.Add(-time.Hour)), `gpu["h2"]`: recordJSON(t, older, fixed.Add(-48*time.Hour))},
			want: []string{"Warning: the hub at " + endpoint + " did not answer: judging the nodes against the list of meta-llama/Llama-3.1-405B-Instruct-FP8@main recorded on gpu[\"h1\"]",
				"connection refused", "recorded on gpu[\"h1\"] at 2026-11-29T23:00:00Z", "No changes."}},
		{name: "", errors: 1,
			want: []string{"the hub's list of meta-llama/Llama-3.1-405B-Instruct-FP8@main could not be read", "connection refused",
				"no node holds a list of meta-llama/Llama-3.1-405B-Instruct-FP8@main recorded by an earlier apply"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := convergedFrom(t, []byte(src), nil)
			for _, n := range []string{`gpu["h1"]`, `gpu["h2"]`, `gpu["h3"]`} {
				hf := cc.facts.Hosts[n]
				hf.Trees = map[string]observe.TreeFacts{dir: modelTree(mf, all, 1e12)}
				hf.Reads = map[string]observe.ReadResult{}
				if r, ok := tc.records[n]; ok {
					hf.Reads[record] = observe.ReadResult{Exists: true, Content: r}
				}
			}
			// The serve running converged was started at the recorded
			// commit.
			cfg := planConfig(t, src, cc.facts)
			cfg.Blocks(model.Type)["llama"].(*model.Model).UseResolution(model.Resolution{Manifest: mf})
			spec, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["llama"])
			if err != nil {
				t.Fatal(err)
			}
			head := cc.facts.Hosts[`gpu["h1"]`]
			rec := head.Records["serve-llama"]
			rec.SpecHash = spec.Hash()
			head.Records["serve-llama"] = rec

			// As plan does: evaluated with the facts, then the kinds'
			// lookups (the hub), then the plan.
			loaded, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: "."})
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rcfg, diags := run.Evaluate(ctx, Kinds(), loaded.Config, cc.facts, benchProject)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			st, err := state.New(benchProject)
			if err != nil {
				t.Fatal(err)
			}
			res := Plan(PlanInput{Config: View(rcfg), Facts: cc.facts, State: st, Project: benchProject})
			var txt, js bytes.Buffer
			if err := plan.RenderText(&txt, res.Plan, plan.TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := plan.RenderJSON(&js, res.Plan, plan.JSONOptions{Version: "test", Now: func() time.Time { return fixed }}); err != nil {
				t.Fatal(err)
			}
			if n := len(res.Plan.Errors()); n != tc.errors {
				t.Errorf("%d errors, want %d: %+v", n, tc.errors, res.Plan.Findings)
			}
			// With the record, nothing changes: the serve keeps its
			// commit. (Without it the plan is an error: apply stops.)
			for _, ch := range res.Plan.Changes {
				if ch.Action != plan.NoOp && tc.errors == 0 {
					t.Errorf("%s: %s (%v)", ch.Address, ch.Action, ch.Reasons)
				}
			}
			if len(res.Work) != 0 && tc.errors == 0 {
				t.Errorf("work %v", res.Work)
			}
			for _, s := range tc.want {
				if !strings.Contains(txt.String(), s) {
					t.Errorf("plan lacks %q\n%s", s, txt.String())
				}
			}
			if tc.name != "" {
				// The port changes with every run: the goldens name the
				// hub ENDPOINT (HUBADDR without the scheme).
				fix := strings.NewReplacer(endpoint, "ENDPOINT", strings.TrimPrefix(endpoint, "http://"), "HUBADDR")
				golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".txt"), []byte(fix.Replace(txt.String())))
				golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".json"), []byte(fix.Replace(js.String())))
			}
		})
	}
}

// TestModelHubOnlyForPlan: evaluating the configuration readies the
// question to the hub without asking it; destroy plans without it; the
// plan asks it once.
func TestModelHubOnlyForPlan(t *testing.T) {
	mf := modelManifest()
	var asked atomic.Int32
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer hub.Close()
	src := strings.Replace(modelConfig(), "token     = var.hf_token", "token     = var.hf_token\n  endpoint  = \""+hub.URL+"\"", 1)
	cc := convergedFrom(t, []byte(src), nil)
	dir := "/data/hf/hub/" + model.CacheDirName(mf.Repo)
	for _, hf := range cc.facts.Hosts {
		hf.Trees = map[string]observe.TreeFacts{dir: modelTree(mf, func(model.File) bool { return true }, 1e12)}
	}
	loaded, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	rcfg, diags := run.Evaluate(context.Background(), Kinds(), loaded.Config, cc.facts, benchProject)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := state.New(benchProject)
	if err != nil {
		t.Fatal(err)
	}
	in := PlanInput{Config: View(rcfg), Facts: cc.facts, State: st, Project: benchProject}
	if n := asked.Load(); n != 0 {
		t.Fatalf("evaluating asked the hub %d times", n)
	}
	res, _ := DestroyWork(in)
	if n := asked.Load(); n != 0 {
		t.Fatalf("destroy asked the hub %d times", n)
	}
	if len(res.Work) == 0 {
		t.Errorf("destroy plans nothing")
	}
	Plan(in)
	if n := asked.Load(); n != 1 {
		t.Errorf("the plan asked the hub %d times, want once", n)
	}
}
