package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
)

// ErrInvalidWithFacts is Observe's error when the configuration is invalid
// with the observed facts (Runner.Diagnostics was shown why).
var ErrInvalidWithFacts = errors.New("the configuration is invalid with the observed facts")

// Observe observes every host (one probe each, in parallel) and computes
// the plan, narrowed to the targets. Configuration problems that only the
// facts reveal go to r.Diagnostics.
func (r *Runner) Observe(ctx context.Context, refreshOnly bool) (*Observation, error) {
	start := time.Now()
	obs, err := r.observeHosts(ctx)
	if err != nil {
		return nil, err
	}
	replace := map[string]bool{}
	for _, a := range r.Options.Replace {
		if err := r.checkReplace(obs.Config, a); err != nil {
			return nil, err
		}
		replace[a] = true
	}
	in := r.planInput(obs.Config, obs.Facts)
	in.RefreshOnly, in.Replace = refreshOnly, replace
	obs.Result = Plan(r.Kinds, in)
	if err := r.narrow(obs); err != nil {
		return nil, err
	}
	obs.Elapsed = time.Since(start)
	return obs, nil
}

// ObserveDestroy observes every host as Observe does and plans the
// destruction of every resource (DestroyPlan), narrowed to the targets,
// without planning the configuration's changes: a destroy needs nothing
// that only a plan asks outside the hosts (a model's hub). It returns the
// order of the walk too.
func (r *Runner) ObserveDestroy(ctx context.Context) (*Observation, *dag.Graph, error) {
	start := time.Now()
	obs, err := r.observeHosts(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := r.checkTargets(obs.Config); err != nil {
		return nil, nil, err
	}
	g := r.DestroyPlan(obs)
	obs.Elapsed = time.Since(start)
	return obs, g, nil
}

// observeHosts observes every host (one probe each, in parallel) and
// evaluates the configuration with the facts: an observation without a
// plan.
func (r *Runner) observeHosts(ctx context.Context) (*Observation, error) {
	spec := ObserveSpec(r.Kinds, r.Config, r.State, r.Project, r.Options.StatusProbes)
	conns := map[string]transport.Conn{}
	for host := range spec.Hosts {
		c, ok := r.Conns[host]
		if !ok {
			return nil, fmt.Errorf("no SSH settings for host %s", host)
		}
		conns[host] = c
	}
	parallelism := r.Options.Parallelism
	if parallelism <= 0 {
		// Observing is read-only and each host does its own work: all at
		// once costs one round trip of wall time, not N/10.
		parallelism = len(conns)
	}
	facts, err := observe.Observe(ctx, conns, spec, parallelism)
	if err != nil {
		return nil, fmt.Errorf("observing hosts: %w", err)
	}
	for _, h := range slices.Sorted(maps.Keys(facts.Hosts)) {
		r.log().Debug("observed", "host", h, "round_trips", facts.RoundTrips[h], "handshakes", r.Conns[h].Stats().Handshakes)
	}
	cfg, diags := Evaluate(ctx, r.Kinds, r.Config, facts, r.Project)
	if diags.HasErrors() {
		if r.Diagnostics != nil {
			r.Diagnostics(r.Config, diags)
		}
		return nil, ErrInvalidWithFacts
	}
	return &Observation{Facts: facts, Config: cfg}, nil
}

// checkTargets refuses a target the configuration does not declare.
func (r *Runner) checkTargets(cfg *config.Config) error {
	g := cfg.Graph()
	for _, t := range r.Options.Targets {
		if !g.Has(t) {
			return fmt.Errorf("-target %s: no such resource in the configuration", t)
		}
	}
	return nil
}

// narrow narrows obs's plan to the targets and their dependencies.
func (r *Runner) narrow(obs *Observation) error {
	if len(r.Options.Targets) == 0 {
		return nil
	}
	if err := r.checkTargets(obs.Config); err != nil {
		return err
	}
	g := obs.Config.Graph()
	keep := map[string]bool{}
	for _, n := range g.Subgraph(r.Options.Targets).Nodes() {
		keep[n] = true
	}
	keepOnly(obs.Result, keep)
	return nil
}

// DestroyPlan replaces obs's plan with the destruction of every resource
// (DestroyPlanOf), narrowed with targets to the targets and what
// depends on them, as Terraform's destroy -target does: destroying a
// resource never takes what it depends on with it. It returns the order
// of the walk.
func (r *Runner) DestroyPlan(obs *Observation) *dag.Graph {
	res, g := DestroyPlanOf(r.Kinds, r.planInput(obs.Config, obs.Facts))
	obs.Result = res
	if len(r.Options.Targets) == 0 {
		return g
	}
	keep := map[string]bool{}
	for _, t := range r.Options.Targets {
		keep[t] = true
	}
	for _, n := range obs.Config.Graph().WithDependents(r.Options.Targets) {
		keep[n] = true
	}
	keepOnly(res, keep)
	return g
}

// keepOnly drops from res every change and piece of work not in keep.
func keepOnly(res *Result, keep map[string]bool) {
	changes := res.Plan.Changes[:0]
	for _, ch := range res.Plan.Changes {
		if keep[ch.Address] {
			changes = append(changes, ch)
		}
	}
	res.Plan.Changes = changes
	for addr := range res.Work {
		if !keep[addr] {
			delete(res.Work, addr)
		}
	}
}

// Starting are the resources of obs's plan (all of the configuration's,
// or the targeted ones) that run but are not ready yet (the kinds'
// kind.KindWithAwait): not converged, as apply would wait for them.
func (r *Runner) Starting(obs *Observation) []*kind.Work {
	planned := map[string]bool{}
	for _, ch := range obs.Result.Plan.Changes {
		planned[ch.Address] = true
	}
	var out []*kind.Work
	for _, w := range starting(r.Kinds, r.planInput(obs.Config, obs.Facts)) {
		if planned[w.Address] {
			out = append(out, w)
		}
	}
	return out
}

// checkReplace refuses a -replace address that names no resource of cfg
// whose kind can be replaced (kind.Traits.Replaceable).
func (r *Runner) checkReplace(cfg *config.Config, a string) error {
	if k := r.Kinds.At(a); k == nil || !k.Traits().Replaceable || !cfg.Graph().Has(a) {
		replaceable := r.Kinds.TypesWith(func(k kind.Kind) bool { return k.Traits().Replaceable })
		return fmt.Errorf("-replace %s: no such %s in the configuration", a, strings.Join(replaceable, " or "))
	}
	return nil
}
