package kindstest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/stepenv"
)

const modelCommit = "0123456789abcdef0123456789abcdef01234567"

// modelConfig is benchConfig(3) with its serve's model a model block.
func modelConfig() string {
	src := string(benchConfig(3))
	src = strings.Replace(src, `model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"`, `model                  = model.llama.source`, 1)
	return src + `
model "llama" {
  source    = "meta-llama/Llama-3.1-405B-Instruct-FP8"
  cache_dir = "/data/hf/hub"
  token     = var.hf_token
}
`
}

// useResolution gives model block name of cfg the hub's answer r, as
// Lookup does.
func useResolution(cfg *Blocks, name string, r model.Resolution) {
	cfg.Blocks(model.Type)[name].(*model.Model).UseResolution(r)
}

// modelManifest is what the hub lists of the model for the tests.
func modelManifest() model.Manifest {
	sha := func(c string) string { return strings.Repeat(c, 64) }
	return model.Manifest{Repo: "meta-llama/Llama-3.1-405B-Instruct-FP8", Revision: "main", Commit: modelCommit, Files: []model.File{
		{Path: "config.json", Size: 1200, BlobID: strings.Repeat("1", 40)},
		{Path: "model-00001-of-00002.safetensors", Size: 200e9, SHA256: sha("a")},
		{Path: "model-00002-of-00002.safetensors", Size: 210e9, SHA256: sha("b")},
		{Path: "model.safetensors.index.json", Size: 90000, BlobID: strings.Repeat("2", 40)},
		{Path: "tokenizer.json", Size: 9e6, BlobID: strings.Repeat("3", 40)},
	}}
}

// modelTree is a node's listing of the model's directory: every file of
// mf, or those keep keeps, with free bytes free.
func modelTree(mf model.Manifest, keep func(model.File) bool, free int64) observe.TreeFacts {
	t := observe.TreeFacts{Exists: true, FreeBytes: free}
	for _, f := range mf.Files {
		if keep(f) {
			t.Files = append(t.Files,
				observe.TreeFile{Path: path.Join("snapshots", mf.Commit, f.Path), Size: f.Size},
				observe.TreeFile{Path: path.Join("blobs", f.Blob()), Size: f.Size})
		}
	}
	if len(t.Files) > 0 {
		t.Files = append(t.Files, observe.TreeFile{Path: "refs/main", Size: 40})
	}
	return t
}

// TestPlanModel: the plan of a served model block over a converged
// cluster, per node, with its goldens: only the head has it (staged to
// the workers over the fabric), every node has it (no change), a worker
// without the disk space and a hub refusal (errors, no work).
func TestPlanModel(t *testing.T) {
	fixed := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	mf := modelManifest()
	dir := "/data/hf/hub/" + model.CacheDirName(mf.Repo)
	all := func(model.File) bool { return true }
	none := func(model.File) bool { return false }
	for _, tc := range []struct {
		name     string
		trees    map[string]observe.TreeFacts
		resolved model.Resolution
		action   plan.Action
		errors   int
		want     []string
		steps    string
	}{
		{name: "model-stage-from-head",
			trees:    map[string]observe.TreeFacts{`gpu["h1"]`: modelTree(mf, all, 1e12), `gpu["h2"]`: modelTree(mf, none, 1e12), `gpu["h3"]`: modelTree(mf, func(f model.File) bool { return !strings.HasPrefix(f.Path, "model-00002") }, 1e12)},
			resolved: model.Resolution{Manifest: mf}, action: plan.Update,
			steps: `stage meta-llama/Llama-3.1-405B-Instruct-FP8 (410.0 GB) from gpu["h1"] to gpu["h2"], gpu["h3"] over the fabric`,
			// The update shows what it changes in the resource's body, not
			// only in comments (issue 33 item 8: "~ update in-place" with
			// nothing but "(5 unchanged attributes hidden)").
			want: []string{`gpu["h1"]: complete`, `gpu["h2"]: absent, 410.0 GB to stage from gpu["h1"] over the fabric (1000.0 GB free)`,
				`gpu["h3"]: partial, 1 file missing, 210.0 GB to stage from gpu["h1"] over the fabric (1000.0 GB free)`,
				"      ~ copies = {\n          ~ \"gpu[\\\"h2\\\"]\" = \"absent\" -> \"complete\"\n          ~ \"gpu[\\\"h3\\\"]\" = \"partial\" -> \"complete\"\n            # (1 unchanged element hidden)\n        }"}},
		{name: "model-download",
			trees:    map[string]observe.TreeFacts{`gpu["h1"]`: modelTree(mf, none, 1e12), `gpu["h2"]`: modelTree(mf, none, 1e12), `gpu["h3"]`: modelTree(mf, none, 1e12)},
			resolved: model.Resolution{Manifest: mf}, action: plan.Create,
			steps: `download meta-llama/Llama-3.1-405B-Instruct-FP8@0123456789ab (410.0 GB) to gpu["h1"] from the hub https://huggingface.co|stage meta-llama/Llama-3.1-405B-Instruct-FP8 (410.0 GB) from gpu["h1"] to gpu["h2"], gpu["h3"] over the fabric`,
			want:  []string{`gpu["h1"]: absent, 410.0 GB to stage, downloaded from the hub`}},
		{name: "model-converged",
			trees:    map[string]observe.TreeFacts{`gpu["h1"]`: modelTree(mf, all, 1e12), `gpu["h2"]`: modelTree(mf, all, 1e12), `gpu["h3"]`: modelTree(mf, all, 1e12)},
			resolved: model.Resolution{Manifest: mf}, action: plan.NoOp,
			want: []string{"No changes."}},
		{name: "model-disk-full",
			trees:    map[string]observe.TreeFacts{`gpu["h1"]`: modelTree(mf, all, 1e12), `gpu["h2"]`: modelTree(mf, none, 100e9), `gpu["h3"]`: modelTree(mf, all, 1e12)},
			resolved: model.Resolution{Manifest: mf}, action: plan.Update, errors: 1,
			want: []string{`not enough disk space on gpu["h2"]`, "410.0 GB to stage into " + dir + ", but its filesystem has 100.0 GB free; free 310.0 GB there"}},
		{name: "model-hub-refused",
			resolved: model.Resolution{Err: errors.New("model meta-llama/Llama-3.1-405B-Instruct-FP8@main: the hub answered 401: it refused the token (Invalid credentials in Authorization header); set the model's token to a valid token with read access")},
			action:   plan.NoOp, errors: 1,
			want: []string{"it refused the token", "main.hcl:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := convergedFrom(t, []byte(modelConfig()), nil)
			for n, tr := range tc.trees {
				cc.facts.Hosts[n].Trees = map[string]observe.TreeFacts{dir: tr}
			}
			st, err := state.New(benchProject)
			if err != nil {
				t.Fatal(err)
			}
			cfg := planConfig(t, modelConfig(), cc.facts)
			useResolution(cfg, "llama", tc.resolved)
			// The serve running converged is the one started at the
			// resolved commit.
			spec, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["llama"])
			if err != nil {
				t.Fatal(err)
			}
			head := cc.facts.Hosts[`gpu["h1"]`]
			rec := head.Records["serve-llama"]
			rec.SpecHash = spec.Hash()
			head.Records["serve-llama"] = rec
			res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject})
			var txt, js bytes.Buffer
			if err := plan.RenderText(&txt, res.Plan, plan.TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := plan.RenderJSON(&js, res.Plan, plan.JSONOptions{Version: "test", Now: func() time.Time { return fixed }}); err != nil {
				t.Fatal(err)
			}
			for _, ch := range res.Plan.Changes {
				want := plan.NoOp
				if ch.Address == "model.llama" {
					want = tc.action
				}
				if ch.Action != want {
					t.Errorf("%s: %s, want %s (%v)", ch.Address, ch.Action, want, ch.Reasons)
				}
			}
			if n := len(res.Plan.Errors()); n != tc.errors {
				t.Errorf("%d errors, want %d: %+v", n, tc.errors, res.Plan.Findings)
			}
			w := res.Work["model.llama"]
			if (w != nil) != (tc.action != plan.NoOp && tc.errors == 0) {
				t.Errorf("work %v with action %s and %d errors", w != nil, tc.action, tc.errors)
			}
			if w != nil {
				// Staged before the walk (with the image pulls), never in it.
				env := &stepenv.StepEnv{}
				var names []string
				for _, st := range PrepareSteps(env, w) {
					names = append(names, st.Name())
				}
				if want := tc.steps; strings.Join(names, "|") != want {
					t.Errorf("prepare steps %q\nwant %q", names, want)
				}
				env.Prepared = true
				if st := Steps(env, w); len(st) != 0 {
					t.Errorf("%d steps in the walk after prepare", len(st))
				}
			}
			for _, s := range tc.want {
				if !strings.Contains(txt.String(), s) {
					t.Errorf("plan lacks %q\n%s", s, txt.String())
				}
			}
			for _, out := range []string{txt.String(), js.String()} {
				if strings.Contains(out, "hf_not_a_real_token") {
					t.Fatalf("the token reached the plan:\n%s", out)
				}
			}
			golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".txt"), txt.Bytes())
			golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".json"), js.Bytes())
		})
	}
}

// TestModelSpecs: a cluster whose serve uses a model block mounts its
// cache_dir at the same path, and the serve runs offline from it; the same
// configuration with the model given by name mounts nothing and sets
// neither variable.
func TestModelSpecs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string
		mount bool
	}{
		{"model block", modelConfig(), true},
		{"model by name", string(benchConfig(3)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := convergedFrom(t, []byte(tc.src), nil)
			cfg := planConfig(t, tc.src, cc.facts)
			rc := cfg.RayClusters["main"]
			for _, s := range cluster.ClusterSpecs(cluster.View(cfg.Config), rc, cc.addrs, nil) {
				if got := slices.Contains(s.Volumes, "/data/hf/hub:/data/hf/hub:ro"); got != tc.mount {
					t.Errorf("%s: volumes %v", s.Node, s.Volumes)
				}
			}
			spec, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["llama"])
			if err != nil {
				t.Fatal(err)
			}
			// The preflight reads the model's config.json where staging
			// puts it (the revision's snapshot in cache_dir).
			var reads []string
			for _, r := range ObserveSpec(cfg, nil, benchProject).Hosts[rc.Head].Reads {
				reads = append(reads, r.Path+" "+r.Ref)
			}
			repo := "/data/hf/hub/models--meta-llama--Llama-3.1-405B-Instruct-FP8"
			if got := slices.Contains(reads, repo+"/snapshots/"+observe.RefPlaceholder+"/config.json "+repo+"/refs/main"); got != tc.mount {
				t.Errorf("head reads %q", reads)
			}
			// The serve runs the commit plan resolved.
			if tc.mount {
				useResolution(cfg, "llama", model.Resolution{Manifest: modelManifest()})
			}
			pinned, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["llama"])
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(strings.Join(pinned.Args, " "), "--revision "+modelCommit); got != tc.mount {
				t.Errorf("serve args %q", pinned.Args)
			}
			want := map[string]string{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": "/data/hf/hub"}
			for k, v := range want {
				if got, ok := spec.Env[k]; ok != tc.mount || ok && got != v {
					t.Errorf("serve env %s = %q (set %v)", k, got, ok)
				}
			}
		})
	}
}

// TestFingerprintTrees: a saved plan is refused when a node's copy of a
// model changed since (a file more), not when only its free space did.
func TestFingerprintTrees(t *testing.T) {
	mf := modelManifest()
	tree := modelTree(mf, func(f model.File) bool { return f.Path == "config.json" }, 1e12)
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{"h": {Trees: map[string]observe.TreeFacts{"/d": tree}}}}
	before := run.HostFingerprints(Kinds(), facts)["h"]
	tree.FreeBytes = 5e11
	facts.Hosts["h"].Trees["/d"] = tree
	if got := run.HostFingerprints(Kinds(), facts)["h"]; got != before {
		t.Errorf("the free space changed the fingerprint")
	}
	tree.Files = append(tree.Files, observe.TreeFile{Path: "blobs/x", Size: 1})
	facts.Hosts["h"].Trees["/d"] = tree
	if got := run.HostFingerprints(Kinds(), facts)["h"]; got == before {
		t.Errorf("a new file left the fingerprint as it was")
	}
}

// TestPlanModelUnused: a model block no serve uses is a warning at its
// line, and is not planned.
func TestPlanModelUnused(t *testing.T) {
	src := string(benchConfig(3)) + "\nmodel \"spare\" {\n  source = \"org/spare\"\n}\n"
	cc := convergedCluster(t, 3)
	cfg := planConfig(t, src, cc.facts)
	st, err := state.New(benchProject)
	if err != nil {
		t.Fatal(err)
	}
	res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject})
	var got []string
	for _, f := range res.Plan.Findings {
		got = append(got, fmt.Sprintf("%s %s %s: %s", f.Severity, f.Address, f.At, f.Summary))
	}
	line := strings.Count(string(benchConfig(3)), "\n") + 2 // after the blank line
	want := fmt.Sprintf("warning model.spare main.hcl:%d: model.spare is used by no vllm_serve: nothing stages it", line)
	if !slices.Equal(got, []string{want}) {
		t.Errorf("findings %q, want %q", got, want)
	}
	if res.Plan.HasChanges() || len(res.Work) != 0 {
		t.Errorf("an unused model is planned: %+v", res.Plan.Changes)
	}
}

// TestPlanModelPreflightNote: a serve about to start whose model block is
// not on the head yet: the preflight's note says apply stages it (not
// that vLLM downloads it), and the model is planned.
func TestPlanModelPreflightNote(t *testing.T) {
	mf := modelManifest()
	cc := convergedFrom(t, []byte(modelConfig()), nil)
	cfg := planConfig(t, modelConfig(), cc.facts)
	useResolution(cfg, "llama", model.Resolution{Manifest: mf})
	head := cc.facts.Hosts[`gpu["h1"]`]
	delete(head.Records, "serve-llama") // the serve starts
	reads := ObserveSpec(cfg, nil, benchProject).Hosts[`gpu["h1"]`].Reads
	if len(reads) == 0 {
		t.Fatal("the head reads nothing of the model")
	}
	head.Reads = map[string]observe.ReadResult{reads[0].Key(): {Exists: false}}
	st, err := state.New(benchProject)
	if err != nil {
		t.Fatal(err)
	}
	res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject})
	want := "the model is not in its Hugging Face cache yet (apply stages it, then checks it before vLLM starts)"
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, want) }) {
		t.Errorf("notes %q lack %q", res.Notes, want)
	}
	if res.Work["model.llama"] == nil || res.Work["vllm_serve.llama"] == nil {
		t.Errorf("work %v, want the model staged and the serve started", slices.Sorted(maps.Keys(res.Work)))
	}
}

// TestModelStatus: status lists each node's copy of a served model as
// plan judges it, with the commit.
func TestModelStatus(t *testing.T) {
	mf := modelManifest()
	dir := "/data/hf/hub/" + model.CacheDirName(mf.Repo)
	cc := convergedFrom(t, []byte(modelConfig()), nil)
	all := func(model.File) bool { return true }
	cc.facts.Hosts[`gpu["h1"]`].Trees = map[string]observe.TreeFacts{dir: modelTree(mf, all, 1e12)}
	cc.facts.Hosts[`gpu["h2"]`].Trees = map[string]observe.TreeFacts{dir: modelTree(mf, all, 1e12)}
	cfg := planConfig(t, modelConfig(), cc.facts)
	useResolution(cfg, "llama", model.Resolution{Manifest: mf})
	st := model.Kind{}.Status(kind.StatusQuery{Config: cfg.Config, Facts: cc.facts})
	if len(st) != 1 || st[0].Address != "model.llama" {
		t.Fatalf("status %+v", st)
	}
	var b bytes.Buffer
	st[0].Render(&b)
	for _, want := range []string{"Model model.llama: meta-llama/Llama-3.1-405B-Instruct-FP8@main (0123456789ab)",
		`  gpu["h1"]: complete`, `  gpu["h2"]: complete`, `  gpu["h3"]: absent, 410.0 GB to stage from gpu["h1"] over the fabric`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}
