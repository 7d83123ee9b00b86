package resources

// The model kind's glue (issue 24): every model logic lives in
// resources/model; what is here connects it to the plan and the steps
// (modelKind), and to the cluster's containers (the cache mounted) and
// the serve (offline, from the cache, at the resolved commit).

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/kind"
	"github.com/rayform/rayform/resources/model"
)

// ServedModels are the model blocks some vllm_serve uses (model =
// model.NAME.source), sorted by name: the only ones plan resolves and
// apply stages.
func ServedModels(cfg *Config) []*model.Model {
	var out []*model.Model
	for _, sv := range sortedServes(cfg) {
		for _, m := range model.Serving(cfg.Config, sv.Model) {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, func(a, b *model.Model) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// ResolveModels asks the hub for the manifest of every served model of
// cfg, by model name (model.ResolveAll): Config.Models.
func ResolveModels(ctx context.Context, cfg *Config, hc *http.Client) map[string]model.Resolution {
	return model.ResolveAll(ctx, hc, ServedModels(cfg))
}

// modelNodes are the nodes that load m: every node of each cluster whose
// serve uses it, the first cluster's head first.
func modelNodes(cfg *Config, m *model.Model) []string {
	var out []string
	for _, sv := range sortedServes(cfg) {
		rc := cfg.RayClusters[sv.Cluster]
		if rc == nil || !slices.Contains(model.Serving(cfg.Config, sv.Model), m) {
			continue
		}
		for _, n := range rc.Nodes() {
			out = appendUnique(out, n)
		}
	}
	return out
}

// modelKind is the model kind (issue 24) as the run reaches it: its
// logic is resources/model's; what is here reads the planner's and the
// steps' environment (the fabric addresses, the connections) for it.
type modelKind struct{ kind.Base }

// Schema is the model block (model.Kind).
func (modelKind) Schema() config.Kind { return model.Kind() }

// Traits: a model is not replaced on request nor has logs; an output
// shows what its schema exports.
func (modelKind) Traits() kind.Traits { return kind.Traits{Exported: kind.Exported(model.Kind())} }

// Plan plans every served model (model.Plan): a change with a line per
// node, the findings, and the staging as work.
func (modelKind) Plan(p kind.Planner) {
	pl := own(p)
	served := ServedModels(pl.cfg)
	for _, v := range pl.cfg.Blocks(model.Type) {
		if m := v.(*model.Model); !slices.Contains(served, m) {
			p.Finding(plan.Finding{Severity: plan.Warning, Address: m.Addr, At: fmt.Sprintf("%s:%d", m.DeclRange.Filename, m.DeclRange.Start.Line),
				Summary: fmt.Sprintf("%s is used by no vllm_serve: nothing stages it", m.Addr),
				Fix:     fmt.Sprintf("set model = %s.source on the vllm_serve that loads it, or remove the block", m.Addr)})
		}
	}
	for _, m := range served {
		var res *model.Resolution
		if r, ok := pl.cfg.Models[m.Name]; ok {
			res = &r
		}
		nodes := modelNodes(pl.cfg, m)
		pm := model.Plan(model.PlanInput{Model: m, Resolution: res, Nodes: nodes, Addrs: pl.addrs,
			Facts: func(n string) *observe.HostFacts { return pl.host(n) }})
		for _, f := range pm.Findings {
			p.Finding(f)
		}
		p.Change(pm.Change)
		if pm.Work != nil {
			p.AddWork(&Work{Address: pm.Change.Address, Type: model.Type, Action: pm.Change.Action, Hosts: nodes, Do: pm.Work})
		}
	}
}

// Steps: none in the walk once PrepareSteps staged the model (apply
// always prepares); without, the staging itself.
func (k modelKind) Steps(env kind.Env, w *Work) []apply.Step {
	if stepEnvOf(env).Prepared {
		return nil
	}
	return k.PrepareSteps(env, w)
}

// PrepareSteps stage the model (model.Work.Steps): they change nothing
// that runs, so apply runs them before the walk, before any serve or
// container is stopped or started.
func (modelKind) PrepareSteps(env kind.Env, w *Work) []apply.Step {
	mw, ok := w.Do.(*model.Work)
	if !ok {
		return unsupported(w)
	}
	e := stepEnvOf(env)
	return mw.Steps(e.Conns, model.StageOptions{Interval: e.ProgressInterval})
}

// modelVolumes are the mounts of rc's containers for the models its
// serves use: each model's cache directory at the same path (nil when
// none, which leaves existing containers' specs as they were).
func modelVolumes(cfg *Config, rc *RayCluster) []string {
	var out []string
	for _, sv := range sortedServes(cfg) {
		if sv.Cluster != rc.Name {
			continue
		}
		for _, m := range model.Serving(cfg.Config, sv.Model) {
			if !mountsAt(rc.Volumes, m.CacheDir) {
				out = appendUnique(out, m.CacheDir+":"+m.CacheDir)
			}
		}
	}
	return out
}

// modelServeEnv sets the environment of a serve whose model is a model
// block: vLLM loads it from the staged cache (HF_HUB_CACHE, the cache_dir
// mounted at the same path) and never reaches for the hub
// (HF_HUB_OFFLINE=1).
func modelServeEnv(cfg *Config, sv *VLLMServe, env map[string]string) {
	for _, m := range model.Serving(cfg.Config, sv.Model) {
		env["HF_HUB_OFFLINE"] = "1"
		env["HF_HUB_CACHE"] = m.CacheDir
		return
	}
}

// mountsAt reports whether one of volumes (docker -v specs,
// HOST:CONTAINER[:OPTIONS]) mounts something at the container path dir.
func mountsAt(volumes []string, dir string) bool {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && path.Clean(parts[1]) == dir {
			return true
		}
	}
	return false
}

// modelServeArgs are the serve's arguments for its model block, unless
// extra_args names a revision: the commit plan resolved the revision to
// (so that a revision that moves restarts the serve on the new weights,
// staged before), else the revision when not main (vLLM, offline, reads
// refs/REVISION, which staging writes).
func modelServeArgs(cfg *Config, sv *VLLMServe) []string {
	if serveRevision(sv.ExtraArgs) != "main" {
		return nil
	}
	for _, m := range model.Serving(cfg.Config, sv.Model) {
		if r, ok := cfg.Models[m.Name]; ok && r.Err == nil && model.IsCommit(r.Manifest.Commit) {
			return []string{"--revision", r.Manifest.Commit}
		}
		if m.Revision != "" && m.Revision != "main" {
			return []string{"--revision", m.Revision}
		}
	}
	return nil
}

// locateServeModel is locateModel, answered by the model kind when the
// serve's model is a model block: its snapshot in cache_dir, which every
// node's host holds at the same path as its containers, at the commit the
// revision names, or refs/REVISION's.
func locateServeModel(cfg *Config, rc *RayCluster, sv *VLLMServe) modelFiles {
	if cfg == nil || cfg.Config == nil {
		return locateModel(rc, sv)
	}
	for _, m := range model.Serving(cfg.Config, sv.Model) {
		mf := modelFiles{Dir: m.Dir() + "/snapshots/" + m.Revision}
		if !model.IsCommit(m.Revision) {
			mf = modelFiles{Dir: m.Dir() + "/snapshots/" + observe.RefPlaceholder, Ref: m.Dir() + "/refs/" + m.Revision}
		}
		if err := (observe.HostSpec{Reads: []observe.ReadProbe{mf.config()}}).Validate(); err != nil {
			return modelFiles{Why: fmt.Sprintf("the host path %s cannot be read by the probe (%v)", mf.Dir, err)}
		}
		return mf
	}
	return locateModel(rc, sv)
}
