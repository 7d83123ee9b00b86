package run

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
)

// env is what the kinds' steps get from the run, for the work of obs.
func (r *Runner) env(obs *Observation) *kind.Env {
	return &kind.Env{Conns: r.Conns, Project: r.Project, Parallelism: r.ApplyParallelism(), Poll: r.Poll, ReadyTimeout: r.ReadyTimeout,
		State: r.State, Log: r.log().Named("apply"), NotAtomic: r.Options.NotAtomic,
		Config: obs.Config, Facts: obs.Facts, Fabric: obs.Result.Fabric}
}

// walkSteps is what the kinds give apply's walk.
type walkSteps struct {
	// steps are each resource's steps, by address.
	steps map[string][]apply.Step
	// early run before the resources they name (not on destroy).
	early []kind.EarlySteps
	// close ends what the kinds readied for the walk.
	close func()
}

// walkSteps asks the kinds for the steps of every resource of obs's work
// (their PrepareSteps left out: prepare ran them), once each kind that
// shares something across the walk readied it (kind.KindWithWalk; ctx
// bounds it), and for the steps that run early
// (kind.KindWithEarlySteps).
func (r *Runner) walkSteps(ctx context.Context, obs *Observation) walkSteps {
	env := r.env(obs)
	env.Prepared = true
	env.Shared = &kind.Shared{}
	var closers []func()
	for _, k := range kind.With[kind.KindWithWalk](r.Kinds) {
		if c := k.OpenWalk(ctx, kind.WalkRequest{Env: env, Work: obs.Result.Work}); c != nil {
			closers = append(closers, c)
		}
	}
	out := walkSteps{steps: map[string][]apply.Step{}, close: func() {
		for _, c := range closers {
			c()
		}
	}}
	for addr, w := range obs.Result.Work {
		out.steps[addr] = StepsOf(r.Kinds, env, w)
	}
	for _, k := range kind.With[kind.KindWithEarlySteps](r.Kinds) {
		out.early = append(out.early, k.EarlySteps(kind.EarlyStepsRequest{Env: r.env(obs), Work: obs.Result.Work, Steps: out.steps})...)
	}
	return out
}

// StepsOf returns the steps that carry out w, its kind's
// (kind.KindWithSteps; none for a kind without them, such as one whose
// work PrepareSteps stages). Work of a type no kind is registered for
// gets one step, which fails naming it.
func StepsOf(kinds kind.Registry, env *kind.Env, w *kind.Work) []apply.Step {
	if w == nil || w.Action == plan.NoOp {
		return nil
	}
	k := kinds.Of(w.Type)
	if k == nil || w.Do == nil {
		return kind.Unsupported(w)
	}
	s, ok := k.(kind.KindWithSteps)
	if !ok {
		return nil
	}
	return s.Steps(kind.StepsRequest{Env: env, Work: w})
}

// PrepareStepsOf are the steps of w that prove, before anything is
// removed or stopped, that what w creates can be created, and change
// nothing that runs (kind.KindWithPrepare). Apply runs them for every
// resource before its walk, whose steps (kind.Env.Prepared) then leave
// them out.
func PrepareStepsOf(kinds kind.Registry, env *kind.Env, w *kind.Work) []apply.Step {
	if w == nil || w.Action == plan.NoOp || w.Do == nil {
		return nil
	}
	k, ok := kinds.Of(w.Type).(kind.KindWithPrepare)
	if !ok {
		return nil
	}
	return k.PrepareSteps(kind.StepsRequest{Env: env, Work: w})
}

// checkPrepare checks, before anything runs, every command line of obs's
// work within its host's limits (kind.KindWithCommandCheck).
func (r *Runner) checkPrepare(obs *Observation) error {
	var errs []error
	for _, addr := range slices.Sorted(maps.Keys(obs.Result.Work)) {
		if err := checkCommands(r.Kinds, obs.Result.Work[addr], r.Project, obs.Facts); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// awaitStepsOf are the steps of w's kind that wait for w (from Starting)
// to be ready (kind.KindWithAwait).
func awaitStepsOf(kinds kind.Registry, env *kind.Env, w *kind.Work) []apply.Step {
	k, ok := kinds.Of(w.Type).(kind.KindWithAwait)
	if !ok {
		return nil
	}
	return k.AwaitSteps(kind.StepsRequest{Env: env, Work: w})
}

// starting lists the work of waiting for the resources of in that run but
// are not ready yet, every kind's (kind.KindWithAwait).
func starting(kinds kind.Registry, in PlanInput) []*kind.Work {
	if in.Config == nil || in.Facts == nil {
		return nil
	}
	var out []*kind.Work
	for _, k := range kind.With[kind.KindWithAwait](kinds) {
		out = append(out, k.Starting(kind.StartingRequest{Config: in.Config, Facts: in.Facts})...)
	}
	return out
}

// record is the state record of w once completed, when the hosts could
// not be observed again: its nodes in Nodes.
func record(w *kind.Work) Present {
	return Present{Type: w.Type, Nodes: w.Hosts, Container: w.Container()}
}
