package resources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/hostenv"
	"github.com/rayform/rayform/resources/kind"
	"github.com/rayform/rayform/resources/kit"
)

// Provider answers the engine's run (engine/run) with the resource kinds:
// what to observe, the plan, the steps, what is present, the locks. It is
// the one place that wires the kinds into a run.
type Provider struct {
	// Poll and RayReadyTimeout are the steps' (StepEnv); zero: their
	// defaults.
	Poll, RayReadyTimeout time.Duration
}

var _ run.Provider = Provider{}

// RunConfig is c as the engine holds it (run.Config).
func RunConfig(c *Config) run.Config { return cfgView{c} }

// cfgView is a Config as the engine holds it.
type cfgView struct{ *Config }

func (c cfgView) Lang() *config.Config { return c.Config.Config }

// ConfigOf returns the Config the engine holds (nil for none).
func ConfigOf(c run.Config) *Config {
	if v, ok := c.(cfgView); ok {
		return v.Config
	}
	return nil
}

// work is a Work as the engine holds it.
type work struct{ w *Work }

func (w work) Address() string     { return w.w.Address }
func (w work) Action() plan.Action { return w.w.Action }

// wrapResult and ResultOf convert between the kinds' plan result and the
// engine's.
func wrapResult(res *Result) *run.Result {
	out := &run.Result{Plan: res.Plan, Work: map[string]run.Work{}, Notes: res.Notes, Data: res.Addrs}
	for addr, w := range res.Work {
		out.Work[addr] = work{w}
	}
	return out
}

// ResultOf is the engine's plan result as the kinds made it (nil for nil).
func ResultOf(res *run.Result) *Result {
	if res == nil {
		return nil
	}
	addrs, _ := res.Data.(map[string]netip.Addr)
	return &Result{Plan: res.Plan, Work: unwrapWork(res.Work), Addrs: addrs, Notes: res.Notes}
}

func unwrapWork(ws map[string]run.Work) map[string]*Work {
	out := map[string]*Work{}
	for addr, w := range ws {
		out[addr] = w.(work).w
	}
	return out
}

func (Provider) planInput(in run.PlanInput) PlanInput {
	return PlanInput{Config: ConfigOf(in.Config), Facts: in.Facts, State: in.State, Project: in.Project, RefreshOnly: in.RefreshOnly, Replace: in.Replace}
}

func (Provider) ObserveSpec(cfg run.Config, st *state.State, project string, status bool) observe.Spec {
	return observeSpec(ConfigOf(cfg), st, project, status)
}

func (Provider) Evaluate(ctx context.Context, c run.Config, facts *observe.Facts, project string) (run.Config, hcl.Diagnostics) {
	loaded := ConfigOf(c)
	f := learn(loaded.Config, facts, project)
	cfg, diags := loaded.WithFacts(f)
	if diags.HasErrors() {
		return nil, diags
	}
	// The keys read now, even where none was (kind.Learner).
	cfg.SetSecrets(f.SecretKeys, f.Bearers)
	// What the kinds' plans need from outside the hosts (kind.WithLookup).
	for _, k := range KindsWith[kind.WithLookup]() {
		k.Lookup(ctx, cfg.Config)
	}
	return cfgView{cfg}, diags
}

func (Provider) CheckReplace(cfg run.Config, a string) error {
	if k := KindAt(a); k == nil || !k.Traits().Replaceable || !cfg.Lang().Graph().Has(a) {
		return fmt.Errorf("-replace %s: no such %s in the configuration", a, strings.Join(TypesWith(func(k kind.Kind) bool { return k.Traits().Replaceable }), " or "))
	}
	return nil
}

func (p Provider) Plan(in run.PlanInput) *run.Result {
	return wrapResult(Plan(p.planInput(in)))
}

func (p Provider) DestroyPlan(in run.PlanInput) (*run.Result, *dag.Graph) {
	res, g := DestroyWork(p.planInput(in))
	return wrapResult(res), g
}

// Starting are the resources every kind waits for (kind.WithAwait).
func (p Provider) Starting(in run.PlanInput) []run.Work {
	cfg := ConfigOf(in.Config)
	if cfg == nil || in.Facts == nil {
		return nil
	}
	var out []run.Work
	for _, k := range KindsWith[kind.WithAwait]() {
		for _, w := range k.Starting(cfg.Config, in.Facts) {
			out = append(out, work{w})
		}
	}
	return out
}

func (Provider) Fingerprints(facts *observe.Facts) map[string]string {
	return HostFingerprints(facts)
}

// LockTargets are the locks of every kind's resources (kind.WithLocks).
func (Provider) LockTargets(c run.Config, st *state.State) []run.LockTarget {
	cfg := ConfigOf(c)
	var out []run.LockTarget
	for _, k := range KindsWith[kind.WithLocks]() {
		for _, l := range k.Locks(cfg.Config, st) {
			out = append(out, run.LockTarget{Resource: l.Resource, Key: l.Key, Host: l.Host, FromState: l.FromState})
		}
	}
	return out
}

func (p Provider) Present(in run.PlanInput) (map[string]run.Present, map[string]bool) {
	present, unknown := PresentResources(p.planInput(in))
	out := map[string]run.Present{}
	for addr, pr := range present {
		out[addr] = run.Present{Type: pr.Type, Nodes: pr.Nodes, Container: pr.Container, Head: pr.Head}
	}
	return out, unknown
}

func (Provider) Record(rw run.Work) run.Present {
	w := rw.(work).w
	r := run.Present{Type: w.Type, Nodes: w.Hosts, Container: w.Container()}
	return r
}

func (Provider) Host(c run.Config, node string) (state.Host, bool) {
	n := ConfigOf(c).Nodes[node]
	if n == nil {
		return state.Host{}, false
	}
	return state.Host{Node: node, Host: n.Host, User: n.User, Port: n.Port, Bastion: n.Bastion}, true
}

func (Provider) Fabric(c run.Config, facts *observe.Facts) (map[string]netip.Addr, map[string]string) {
	return fabric(ConfigOf(c).Config, facts)
}

func (Provider) Unreached(facts *observe.Facts, ws map[string]run.Work) []run.Unreach {
	var out []run.Unreach
	for _, u := range Unreached(facts, unwrapWork(ws)) {
		out = append(out, run.Unreach{Address: u.Address, Node: u.Node, Why: u.Why})
	}
	return out
}

// CheckPrepare checks every command line within the hosts' limits
// (kit.CheckCommandLimits).
func (Provider) CheckPrepare(obs *run.Observation, project string) error {
	var errs []error
	for _, addr := range slices.Sorted(maps.Keys(obs.Result.Work)) {
		if w := obs.Result.Work[addr].(work).w; w.Action != plan.NoOp && w.Action != plan.Delete {
			if err := kit.CheckCommandLimits(w, project, ExecLimits(obs.Facts)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// stepEnv is what the steps of w need from the run.
func (p Provider) stepEnv(env run.Env, obs *run.Observation, w *Work) *hostenv.StepEnv {
	addrs, _ := obs.Result.Data.(map[string]netip.Addr)
	return &hostenv.StepEnv{
		Conns:           env.Conns,
		Project:         env.Project,
		Poll:            p.Poll,
		RayReadyTimeout: p.RayReadyTimeout,
		Parallelism:     env.Parallelism,
		Diagnose:        DiagnoseContext(ConfigOf(obs.Config), obs.Facts, addrs, w),
		Log:             env.Log,
		State:           env.State, // the images' answers to the architecture check
		NotAtomic:       env.NotAtomic,
	}
}

// PrepareSteps are PrepareSteps: the image on every node that
// starts a container, and Ray in it.
func (p Provider) PrepareSteps(env run.Env, obs *run.Observation, addr string) []apply.Step {
	w := obs.Result.Work[addr].(work).w
	return PrepareSteps(p.stepEnv(env, obs, w), w)
}

// Walk gives each resource's steps (Steps, the prepare steps left out),
// with the data-plane checks' ranks started as their containers start,
// and the kinds' work ahead of the walk (kind.WithAhead).
func (p Provider) Walk(ctx context.Context, env run.Env, obs *run.Observation) run.WalkSteps {
	ws := unwrapWork(obs.Result.Work)
	checks := hostenv.NewCheckStarts(ctx, env.Conns, ws, dataplane.Options{})
	out := run.WalkSteps{Steps: map[string][]apply.Step{}, After: map[string][]string{}, Done: checks.Close}
	for addr, w := range ws {
		if len(w.After) > 0 {
			out.After[addr] = w.After
		}
		e := p.stepEnv(env, obs, w)
		e.Checks = checks
		// prepare ran the image and Ray checks.
		e.Prepared = true
		out.Steps[addr] = Steps(e, w)
	}
	e := (&hostenv.StepEnv{Conns: env.Conns, Project: env.Project, Poll: p.Poll, Parallelism: env.Parallelism, Log: env.Log}).WithDefaults()
	for _, k := range KindsWith[kind.WithAhead]() {
		for _, a := range k.Ahead(e, ws, out.Steps) {
			out.Ahead = append(out.Ahead, run.Ahead{Node: a.Node, Before: a.Before,
				Resource: &apply.Resource{Address: a.Address, Action: a.Action, Steps: a.Steps, Ahead: true}})
		}
	}
	return out
}

func (Provider) OrderDestroy(g *dag.Graph, ws map[string]run.Work) {
	OrderDestroy(g, unwrapWork(ws))
}

// AwaitSteps are the steps of w's kind that wait for it (kind.WithAwait).
func (p Provider) AwaitSteps(env run.Env, obs *run.Observation, rw run.Work) []apply.Step {
	w := rw.(work).w
	k, ok := KindOf(w.Type).(kind.WithAwait)
	if !ok {
		return nil
	}
	return k.AwaitSteps(p.stepEnv(env, obs, w).WithDefaults(), w)
}

// DiagnoseContext is what the failure classifier needs to know about the
// resource of w, as its kind tells (hostenv.Diagnoser); an empty context
// for a kind that does not.
func DiagnoseContext(cfg *Config, facts *observe.Facts, addrs map[string]netip.Addr, w *Work) diagnose.Context {
	if d, ok := KindAt(w.Address).(hostenv.Diagnoser); ok && cfg != nil {
		return d.DiagnoseContext(cfg.Config, facts, addrs, w.Address)
	}
	return diagnose.Context{NodeAddrs: map[string]string{}, MgmtAddrs: map[string]string{}}
}
