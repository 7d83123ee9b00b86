package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/dataplane"
)

// provider answers the engine's run (engine/run) with the resource kinds
// (resources): it is the one place that wires them together.
type provider struct {
	// timeouts bound apply's waits.
	timeouts applyTimeouts
}

var _ run.Provider = provider{}

// cfgView is a resources.Config as the engine holds it.
type cfgView struct{ *resources.Config }

func (c cfgView) Lang() *config.Config { return c.Config.Config }

// cfgOf returns the resources' configuration the engine holds (nil for
// none).
func cfgOf(c run.Config) *resources.Config {
	if v, ok := c.(cfgView); ok {
		return v.Config
	}
	return nil
}

// work is a resources.Work as the engine holds it.
type work struct{ w *resources.Work }

func (w work) Address() string     { return w.w.Address }
func (w work) Action() plan.Action { return w.w.Action }

// wrapResult and unwrapResult convert between the resources' plan result
// and the engine's.
func wrapResult(res *resources.Result) *run.Result {
	out := &run.Result{Plan: res.Plan, Work: map[string]run.Work{}, Notes: res.Notes, Data: res.Addrs}
	for addr, w := range res.Work {
		out.Work[addr] = work{w}
	}
	return out
}

func unwrapResult(res *run.Result) *resources.Result {
	if res == nil {
		return nil
	}
	addrs, _ := res.Data.(map[string]netip.Addr)
	return &resources.Result{Plan: res.Plan, Work: unwrapWork(res.Work), Addrs: addrs, Notes: res.Notes}
}

func unwrapWork(ws map[string]run.Work) map[string]*resources.Work {
	out := map[string]*resources.Work{}
	for addr, w := range ws {
		out[addr] = w.(work).w
	}
	return out
}

// observedFrom is the engine's observation seen through the resources.
func observedFrom(o *run.Observation) *observed {
	return &observed{facts: o.Facts, cfg: cfgOf(o.Config), result: unwrapResult(o.Result), elapsed: o.Elapsed}
}

func (provider) planInput(in run.PlanInput) resources.PlanInput {
	return resources.PlanInput{Config: cfgOf(in.Config), Facts: in.Facts, State: in.State, Project: in.Project, RefreshOnly: in.RefreshOnly, Replace: in.Replace}
}

func (provider) ObserveSpec(cfg run.Config, st *state.State, project string, status bool) observe.Spec {
	spec := resources.ObserveSpec(cfgOf(cfg), st, project)
	if status {
		resources.StatusProbes(&spec, cfgOf(cfg), project)
	}
	return spec
}

func (provider) Evaluate(c run.Config, facts *observe.Facts, project string) (run.Config, hcl.Diagnostics) {
	loaded := cfgOf(c)
	addrs, _ := resources.FabricAddrs(loaded, facts)
	cfg, diags := loaded.WithFacts(resources.Facts{FabricAddrs: addrs})
	if diags.HasErrors() {
		return nil, diags
	}
	cfg.UseSecretKeys(facts, project)
	return cfgView{cfg}, diags
}

func (provider) CheckReplace(cfg run.Config, a string) error {
	if !strings.HasPrefix(a, "ray_cluster.") && !strings.HasPrefix(a, "vllm_serve.") || !cfg.Lang().Graph().Has(a) {
		return fmt.Errorf("-replace %s: no such ray_cluster or vllm_serve in the configuration", a)
	}
	return nil
}

func (p provider) Plan(in run.PlanInput) *run.Result {
	return wrapResult(resources.Plan(p.planInput(in)))
}

func (p provider) DestroyPlan(in run.PlanInput) (*run.Result, *dag.Graph) {
	res, g := resources.DestroyWork(p.planInput(in))
	return wrapResult(res), g
}

func (p provider) Starting(in run.PlanInput) []run.Work {
	var out []run.Work
	for _, w := range resources.StartingServes(p.planInput(in)) {
		out = append(out, work{w})
	}
	return out
}

func (provider) Fingerprints(facts *observe.Facts) map[string]string {
	return resources.HostFingerprints(facts)
}

// LockTargets are each ray_cluster's lock on its head, and, for each
// ray_cluster the state records, its lock on the head it was applied with
// (every host it was applied to when the state does not say which was the
// head), so that a copy of the configuration with another head, or a
// renamed cluster carrying the same state, waits for a run of the
// original.
func (provider) LockTargets(c run.Config, st *state.State) []run.LockTarget {
	cfg := cfgOf(c)
	var out []run.LockTarget
	for _, name := range slices.Sorted(maps.Keys(cfg.RayClusters)) {
		rc := cfg.RayClusters[name]
		out = append(out, run.LockTarget{Resource: "ray_cluster." + name, Key: name, Host: rc.Head})
	}
	for _, addr := range st.Addresses() {
		a := plan.ParseAddress(addr)
		if a.Type != "ray_cluster" {
			continue
		}
		r, _ := st.Get(addr)
		if r.Head != "" {
			out = append(out, run.LockTarget{Resource: "ray_cluster." + a.Instance(), Key: a.Instance(), Host: r.Head, FromState: true})
			continue
		}
		for _, h := range r.Hosts {
			out = append(out, run.LockTarget{Resource: "ray_cluster." + a.Instance(), Key: a.Instance(), Host: h.Node, FromState: true})
		}
	}
	return out
}

func (p provider) Present(in run.PlanInput) (map[string]run.Present, map[string]bool) {
	present, unknown := resources.PresentResources(p.planInput(in))
	out := map[string]run.Present{}
	for addr, pr := range present {
		out[addr] = run.Present{Type: pr.Type, Nodes: pr.Nodes, Container: pr.Container, Head: pr.Head}
	}
	return out, unknown
}

func (provider) Record(rw run.Work) run.Present {
	w := rw.(work).w
	r := run.Present{Type: w.Type, Nodes: w.Hosts}
	if w.Cluster != nil {
		r.Container = w.Cluster.Name
		if len(w.Cluster.Specs) > 0 {
			r.Container = w.Cluster.Specs[0].Name
		}
	}
	if w.Serve != nil {
		r.Container = w.Serve.Spec.Container
	}
	return r
}

func (provider) Host(c run.Config, node string) (state.Host, bool) {
	n := cfgOf(c).Nodes[node]
	if n == nil {
		return state.Host{}, false
	}
	return state.Host{Node: node, Host: n.Host, User: n.User, Port: n.Port, Bastion: n.Bastion}, true
}

func (provider) Fabric(c run.Config, facts *observe.Facts) (map[string]netip.Addr, map[string]string) {
	return resources.FabricAddrs(cfgOf(c), facts)
}

func (provider) Unreached(facts *observe.Facts, ws map[string]run.Work) []run.Unreach {
	var out []run.Unreach
	for _, u := range resources.Unreached(facts, unwrapWork(ws)) {
		out = append(out, run.Unreach{Address: u.Address, Node: u.Node, Why: u.Why})
	}
	return out
}

// CheckPrepare checks every command line within the hosts' limits
// (resources.CheckCommandLimits).
func (provider) CheckPrepare(obs *run.Observation, project string) error {
	var errs []error
	for _, addr := range slices.Sorted(maps.Keys(obs.Result.Work)) {
		if w := obs.Result.Work[addr].(work).w; w.Action != plan.NoOp && w.Action != plan.Delete {
			if err := resources.CheckCommandLimits(w, project); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// stepEnv is what the steps of w need from the run.
func (p provider) stepEnv(env run.Env, obs *run.Observation, w *resources.Work) *resources.StepEnv {
	addrs, _ := obs.Result.Data.(map[string]netip.Addr)
	return &resources.StepEnv{
		Conns:           env.Conns,
		Project:         env.Project,
		Poll:            p.timeouts.poll,
		RayReadyTimeout: p.timeouts.rayReady,
		Parallelism:     env.Parallelism,
		Diagnose:        resources.DiagnoseContext(cfgOf(obs.Config), obs.Facts, addrs, w),
		Log:             env.Log,
		State:           env.State, // the images' answers to the architecture check
	}
}

// PrepareSteps are resources.PrepareSteps: the image on every node that
// starts a container, and Ray in it.
func (p provider) PrepareSteps(env run.Env, obs *run.Observation, addr string) []apply.Step {
	w := obs.Result.Work[addr].(work).w
	return resources.PrepareSteps(p.stepEnv(env, obs, w), w)
}

// Walk gives each resource's steps (resources.Steps, the prepare steps
// left out), with the data-plane checks' ranks started as their
// containers start, and stopServesFirst's stops ahead.
func (p provider) Walk(ctx context.Context, env run.Env, obs *run.Observation) run.WalkSteps {
	cfg := cfgOf(obs.Config)
	ws := unwrapWork(obs.Result.Work)
	checks := resources.NewCheckStarts(ctx, env.Conns, ws, dataplane.Options{})
	serveNodes := map[string][]string{}
	for _, sv := range cfg.Serves {
		if rc := cfg.RayClusters[sv.Cluster]; rc != nil {
			serveNodes[sv.Addr] = rc.Nodes()
		}
	}
	out := run.WalkSteps{Steps: map[string][]apply.Step{}, Done: checks.Close}
	for addr, w := range ws {
		e := p.stepEnv(env, obs, w)
		e.ServeNodes = serveNodes
		e.Checks = checks
		// prepare ran the image and Ray checks.
		e.Prepared = true
		out.Steps[addr] = resources.Steps(e, w)
	}
	out.Ahead = p.stopServesFirst(env, cfg, ws, out.Steps)
	return out
}

// stopServesFirst stops each serve that is replaced along with its
// cluster's containers before the cluster changes: a worker under a
// running serve must not go away (nor restart) under it. The stop is a
// node of its own, "ADDRESS#stop", that the cluster depends on; the
// serve's own stop step then finds the process gone.
func (p provider) stopServesFirst(env run.Env, cfg *resources.Config, ws map[string]*resources.Work, steps map[string][]apply.Step) []run.Ahead {
	var out []run.Ahead
	for _, sv := range cfg.Serves {
		w := ws[sv.Addr]
		rc := cfg.RayClusters[sv.Cluster]
		if w == nil || w.Action != plan.Replace || rc == nil {
			continue
		}
		cw := ws[rc.Addr]
		if cw == nil || cw.Action == plan.NoOp {
			continue
		}
		if len(steps[sv.Addr]) == 0 {
			continue
		}
		e := &resources.StepEnv{Conns: env.Conns, Project: env.Project, Poll: p.timeouts.poll, Parallelism: env.Parallelism, Log: env.Log}
		stop := resources.ServeStopSteps(e, w)
		if len(stop) == 0 {
			continue
		}
		out = append(out, run.Ahead{Node: sv.Addr + "#stop", Before: rc.Addr,
			Resource: &apply.Resource{Address: sv.Addr, Action: plan.Replace, Steps: stop, Ahead: true}})
	}
	return out
}

func (provider) OrderDestroy(g *dag.Graph, ws map[string]run.Work) {
	resources.OrderDestroy(g, unwrapWork(ws))
}

func (p provider) AwaitSteps(env run.Env, obs *run.Observation, rw run.Work) []apply.Step {
	w := rw.(work).w
	return resources.AwaitSteps(p.stepEnv(env, obs, w), w)
}
