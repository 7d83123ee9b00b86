package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
)

// View is everything a person sees of an apply or a destroy. The engine
// prints nothing itself.
type View interface {
	LockView
	// Hooks render the progress of the walk (and of the read-only steps
	// around it).
	Hooks() apply.Hooks
	// Plan shows the plan about to be applied.
	Plan(obs *Observation) error
	// Confirm asks for approval; only a yes approves. ctx ending (an
	// interrupt, a lost lock) answers no at once.
	Confirm(ctx context.Context) bool
	// Cancelled: the approval was refused.
	Cancelled()
	// Interrupting: the first interrupt came; the run stops starting new
	// steps and finishes the ones running.
	Interrupting()
	// Error reports an error that ends (or mars) the run.
	Error(err error)
	// Failed reports the failures of the walk (or of the steps around
	// it): each resource's error once; when interrupted, what the
	// interrupt cut short.
	Failed(err error, interrupted bool)
	// NothingChanged: the checks before the walk failed, so the walk did
	// not start.
	NothingChanged()
	// LockLost: a lock was lost during the walk (err says which and what
	// to do).
	LockLost(err error)
	// Unreached: a destroy could not reach these hosts; what they hold
	// stays, and so do its state records.
	Unreached(un []Unreach)
	// Complete: the run succeeded; counts are the plan's, obs is the
	// converged observation (its outputs); changed is false when there
	// was nothing to change.
	Complete(counts plan.Counts, obs *Observation, changed bool)
}

// ApplyRequest says what one Apply does.
type ApplyRequest struct {
	// AutoApprove skips the confirmation.
	AutoApprove bool
	// Saved is the plan file to apply exactly, or nil.
	Saved *planfile.File
	// Destroy destroys every resource (narrowed by the targets) instead.
	Destroy bool
	// OnInterrupt installs the handler of the first interrupt (nil
	// removes it); the second interrupt cancels Apply's context.
	OnInterrupt func(func())
}

// ErrFailed is what Apply returns when the run failed: the view was told
// why.
var ErrFailed = errors.New("failed")

// Apply runs the whole apply (or destroy): lock, observe, plan, confirm,
// prepare, walk, re-observe, save the state, check that it converged. It
// returns nil on success and ErrFailed otherwise, the view having shown
// why.
func (r *Runner) Apply(ctx context.Context, req ApplyRequest, v View) error {
	if r.applyRun(ctx, req, v) {
		return nil
	}
	return ErrFailed
}

func (r *Runner) applyRun(ctx context.Context, req ApplyRequest, v View) bool {
	// Every host's handshake overlaps with taking the locks on the heads:
	// without this the workers would only be dialled once the locks are
	// held, and a no-op apply would cost a handshake more than plan.
	r.connectAhead(ctx)
	op := "apply"
	if req.Destroy {
		op = "destroy"
	}
	onInterrupt := req.OnInterrupt
	if onInterrupt == nil {
		onInterrupt = func(func()) {}
	}
	// Two runs sharing the state file never interleave their saves.
	if !r.Options.NoLock {
		unlockState, err := state.Lock(r.StatePath, Holder(op), r.Options.LockTimeout)
		if err != nil {
			v.Error(fmt.Errorf("%w\n\nAnother rayform run uses this state file. Wait for it to finish (-lock-timeout=DURATION waits for it).", err))
			return false
		}
		defer unlockState()
	}
	locks, err := r.takeLocks(ctx, op, v)
	if err != nil {
		v.Error(err)
		return false
	}
	defer locks.release()
	// A lost lock stops the run: every change first checks the locks (so
	// none is made after the loss is known), and the loss cancels what is
	// in flight.
	interrupted := ctx.Done() // closed by the second Ctrl-C
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-locks.lost:
			r.log().Warn("cluster lock lost", "error", locks.Err())
			cancel(locks.Err())
		case <-ctx.Done():
		}
	}()
	for name, conn := range r.Conns {
		r.Conns[name] = locks.guard(name, conn)
	}
	// lockErr prefers the lost lock over the error it caused.
	lockErr := func(err error) error {
		if lerr := locks.Err(); lerr != nil {
			return fmt.Errorf("%w\n\nrayform stopped: without the lock another rayform may be changing the cluster, so no further change was made. Run apply again to converge", lerr)
		}
		return err
	}

	// A destroy plans the removals only (ObserveDestroy): it depends on
	// nothing a plan of the configuration's changes asks outside the
	// hosts.
	var obs *Observation
	var destroyGraph *dag.Graph
	if req.Destroy {
		obs, destroyGraph, err = r.ObserveDestroy(ctx)
	} else {
		obs, err = r.Observe(ctx, false)
	}
	if err != nil {
		v.Error(lockErr(err))
		return false
	}
	p := obs.Result.Plan
	if req.Saved != nil {
		if err := req.Saved.Check(r.Current(obs)); err != nil {
			v.Error(err)
			return false
		}
		if err := req.Saved.CheckChanges(r.Planned(p).Changes); err != nil {
			v.Error(err)
			return false
		}
	}
	if err := v.Plan(obs); err != nil {
		v.Error(err)
		return false
	}
	if len(p.Errors()) > 0 {
		return false
	}
	if !p.HasChanges() && len(obs.Result.Work) == 0 {
		return r.nothingToDo(ctx, req, v, obs, interrupted)
	}
	if !req.AutoApprove && p.HasChanges() {
		if !v.Confirm(ctx) {
			// The deferred releases free the locks on the way out.
			v.Cancelled()
			return false
		}
	}

	stop := make(chan struct{})
	var stopped atomic.Bool
	onInterrupt(func() {
		if !stopped.Swap(true) {
			v.Interrupting()
			close(stop)
		}
	})
	defer onInterrupt(nil)
	cut := func() bool { return stopped.Load() || closed(interrupted) }

	hooks := &completedHooks{Hooks: v.Hooks(), done: map[string]bool{}}
	// Before the first change: everything that can be checked, and every
	// read-only step that proves what the walk starts can start. A
	// failure here leaves everything running as it was.
	if err := r.prepare(ctx, obs, hooks, stop); err != nil {
		v.Failed(err, cut())
		v.NothingChanged()
		return false
	}

	g, work, done := r.applyGraph(ctx, obs, destroyGraph)
	walkErr := apply.Walk(ctx, g, work, hooks, apply.Options{Parallelism: r.ApplyParallelism(), Stop: stop})
	if done != nil {
		done()
	}
	// Re-observe whatever the outcome: the state records what the hosts
	// show, and a successful walk must have converged.
	// A -replace is done once replaced.
	r.Options.Replace = nil
	again, againErr := r.reobserve(ctx, interrupted, req.Destroy)
	saveErr := r.recordState(obs, again, hooks.completed())
	if saveErr != nil {
		v.Error(fmt.Errorf("saving state: %w", saveErr))
	}
	// An interrupt (Ctrl-C once: stop; twice: the context) is not a
	// failure to diagnose: what it cut short is listed, nothing more.
	if lerr := locks.Err(); lerr != nil {
		v.Failed(walkErr, cut())
		v.LockLost(lockErr(lerr))
		return false
	}
	if walkErr != nil {
		v.Failed(walkErr, cut())
		return false
	}
	if saveErr != nil {
		return false
	}
	if againErr != nil {
		v.Error(fmt.Errorf("re-observing after apply: %w", againErr))
		return false
	}
	// The plan against the state as now recorded.
	if req.Destroy {
		r.DestroyPlan(again)
	} else {
		again.Result = r.Provider.Plan(r.planInput(again.Config, again.Facts))
		if err := r.narrow(again); err != nil {
			v.Error(err)
			return false
		}
	}
	if again.Result.Plan.HasChanges() {
		var left []string
		for _, ch := range again.Result.Plan.Changes {
			if ch.Action != plan.NoOp {
				left = append(left, fmt.Sprintf("%s (%s: %s)", ch.Address, ch.Action, strings.Join(ch.Reasons, "; ")))
			}
		}
		v.Error(fmt.Errorf("%s did not converge: after it, the plan still has changes:\n  %s", op, strings.Join(left, "\n  ")))
		return false
	}
	if req.Destroy && r.reportUnreached(v, again) {
		return false
	}
	if err := r.recordFabric(again); err != nil {
		v.Error(fmt.Errorf("saving state: %w", err))
		return false
	}
	if !req.Destroy {
		// A resource the walk did not touch may still be starting.
		if err := r.awaitStarting(ctx, again, hooks, stop); err != nil {
			v.Failed(err, cut())
			return false
		}
	}
	v.Complete(p.Counts(), again, true)
	return true
}

// nothingToDo ends a run whose plan changes nothing.
func (r *Runner) nothingToDo(ctx context.Context, req ApplyRequest, v View, obs *Observation, interrupted <-chan struct{}) bool {
	// The state still records what the hosts show (an earlier run may
	// have been cut short before it could).
	if req.Saved == nil && len(r.Options.Targets) == 0 {
		if err := r.recordState(obs, obs, nil); err != nil {
			v.Error(fmt.Errorf("saving state: %w", err))
			return false
		}
		// And each node's fabric address, which output reads.
		if err := r.recordFabric(obs); err != nil {
			v.Error(fmt.Errorf("saving state: %w", err))
			return false
		}
	}
	if req.Destroy && r.reportUnreached(v, obs) {
		return false
	}
	// Nothing to change is no success while a resource is not ready yet:
	// wait for it.
	if !req.Destroy {
		if err := r.awaitStarting(ctx, obs, v.Hooks(), nil); err != nil {
			v.Failed(err, closed(interrupted))
			return false
		}
	}
	v.Complete(plan.Counts{}, obs, false)
	return true
}

// reobserve observes the hosts after the walk (as a destroy does, with
// destroy set). A run whose lock was lost still observes (read-only,
// bounded by a minute); one cut short by a second interrupt (interrupted
// closed) does not.
func (r *Runner) reobserve(ctx context.Context, interrupted <-chan struct{}, destroy bool) (*Observation, error) {
	if closed(interrupted) {
		return nil, errors.New("interrupted")
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
	}
	if destroy {
		obs, _, err := r.ObserveDestroy(ctx)
		return obs, err
	}
	return r.Observe(ctx, false)
}

// connectAhead starts dialling, in the background, every host of the run
// (exactly the hosts apply observes); the first command on each
// connection waits for its dial.
func (r *Runner) connectAhead(ctx context.Context) {
	for _, conn := range r.Conns {
		go func() { _ = transport.Connect(ctx, conn) }()
	}
}

// env is what the provider's steps get.
func (r *Runner) env() Env {
	return Env{Conns: r.Conns, Project: r.Project, Parallelism: r.ApplyParallelism(), State: r.State, Log: r.log().Named("apply"), NotAtomic: r.Options.NotAtomic}
}

// applyGraph turns the plan's work into the engine's resources, ordered by
// the configuration's graph; removed resources are destroyed in the
// provider's order (OrderDestroy), the provider's Ahead parts run
// before the resources they name, and each resource waits for those the
// provider orders it after (WalkSteps.After). A destroy walks destroyGraph.
func (r *Runner) applyGraph(ctx context.Context, obs *Observation, destroyGraph *dag.Graph) (*dag.Graph, map[string]*apply.Resource, func()) {
	g := obs.Config.Lang().Graph()
	if destroyGraph != nil {
		g = destroyGraph
	}
	ws := r.Provider.Walk(ctx, r.env(), obs)
	work := map[string]*apply.Resource{}
	for addr, w := range obs.Result.Work {
		work[addr] = &apply.Resource{Address: addr, Action: w.Action(), Steps: ws.Steps[addr]}
		if w.Action() == plan.Delete && destroyGraph == nil {
			g.Add(addr)
		}
	}
	if destroyGraph == nil {
		r.Provider.OrderDestroy(g, obs.Result.Work)
		for _, a := range ws.Ahead {
			work[a.Node] = a.Resource
			g.Add(a.Node)
			g.Connect(a.Before, a.Node)
		}
		for _, addr := range slices.Sorted(maps.Keys(ws.After)) {
			for _, dep := range ws.After[addr] {
				if g.Has(addr) && g.Has(dep) {
					g.Connect(addr, dep)
				}
			}
		}
	}
	return g, work, ws.Done
}

// prepare proves, before the walk changes anything, that what it will
// start can start: the provider's CheckPrepare, then every resource's
// PrepareSteps (read-only: images pulled while the old containers keep
// running). The first Ctrl-C (stop) cancels it: nothing was changed yet.
func (r *Runner) prepare(ctx context.Context, obs *Observation, hooks apply.Hooks, stop <-chan struct{}) error {
	if err := r.Provider.CheckPrepare(obs, r.Project); err != nil {
		return err
	}
	var rs []*apply.Resource
	for _, addr := range slices.Sorted(maps.Keys(obs.Result.Work)) {
		w := obs.Result.Work[addr]
		if steps := r.Provider.PrepareSteps(r.env(), obs, addr); len(steps) > 0 {
			rs = append(rs, &apply.Resource{Address: addr, Action: w.Action(), Steps: steps})
		}
	}
	return r.runReadOnly(ctx, rs, hooks, stop)
}

// runReadOnly runs steps that change nothing the hosts run (apply.Prepare)
// and stops them at once on the first Ctrl-C (stop), as nothing is left
// half done.
func (r *Runner) runReadOnly(ctx context.Context, rs []*apply.Resource, hooks apply.Hooks, stop <-chan struct{}) error {
	if len(rs) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return apply.Prepare(ctx, rs, hooks, apply.Options{Parallelism: r.ApplyParallelism(), Stop: stop})
}

// awaitStarting waits for every resource of the plan that runs but is not
// ready yet (Starting): apply succeeds only when every resource it leaves
// is ready, whether or not it changed anything.
func (r *Runner) awaitStarting(ctx context.Context, obs *Observation, hooks apply.Hooks, stop <-chan struct{}) error {
	var rs []*apply.Resource
	for _, w := range r.Starting(obs) {
		rs = append(rs, &apply.Resource{Address: w.Address(), Action: plan.NoOp, Steps: r.Provider.AwaitSteps(r.env(), obs, w)})
	}
	return r.runReadOnly(ctx, rs, hooks, stop)
}

// reportUnreached tells the view, after a destroy, of every host it could
// not reach and the resources left there, which the state keeps; true
// when there is any: the destroy failed.
func (r *Runner) reportUnreached(v View, obs *Observation) bool {
	un := r.Provider.Unreached(obs.Facts, obs.Result.Work)
	if len(un) == 0 {
		return false
	}
	v.Unreached(un)
	return true
}

// completedHooks notes which resources the walk completed.
type completedHooks struct {
	apply.Hooks
	mu   sync.Mutex
	done map[string]bool
}

func (h *completedHooks) ResourceComplete(addr string, action plan.Action, elapsed time.Duration) {
	h.mu.Lock()
	h.done[addr] = true
	h.mu.Unlock()
	h.Hooks.ResourceComplete(addr, action, elapsed)
}

func (h *completedHooks) completed() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.done)
}

// closed reports whether ch is closed (the second Ctrl-C came).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
