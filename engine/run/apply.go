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

// Apply runs the whole apply (or destroy) as its phases (applyRun): lock,
// observe and plan, confirm, prepare, walk, re-observe and record the
// state, check that it converged. It returns nil on success and ErrFailed
// otherwise, the view having shown why.
func (r *Runner) Apply(ctx context.Context, req ApplyRequest, v View) error {
	a := &applyRun{Runner: r, req: req, v: v, op: "apply"}
	if req.Destroy {
		a.op = "destroy"
	}
	if a.run(ctx) {
		return nil
	}
	return ErrFailed
}

// applyRun is one apply (or destroy) going through its phases; each phase
// reports its failures to the view and says whether the run goes on.
type applyRun struct {
	*Runner
	req ApplyRequest
	v   View
	op  string
	// locks are the run's locks; interrupted is closed by the second
	// Ctrl-C (the caller's context ending).
	locks       *runLocks
	interrupted <-chan struct{}
	// obs is the observation and plan applied; destroyGraph orders a
	// destroy's walk.
	obs          *Observation
	destroyGraph *dag.Graph
	// stop is closed by the first Ctrl-C (stopped then set): no new step
	// starts.
	stop    chan struct{}
	stopped atomic.Bool
	hooks   *completedHooks
}

// run runs the phases in order: lock, plan (and confirm), prepare, walk,
// record, converge.
func (a *applyRun) run(ctx context.Context) bool {
	// Every host's handshake overlaps with taking the locks on the heads:
	// without this the workers would only be dialled once the locks are
	// held, and a no-op apply would cost a handshake more than plan.
	a.connectAhead(ctx)
	ctx, release, ok := a.lock(ctx)
	if !ok {
		return false
	}
	defer release()
	if proceed, ok := a.plan(ctx); !proceed {
		return ok
	}
	defer a.watchInterrupts()()
	// Before the first change: everything that can be checked, and every
	// read-only step that proves what the walk starts can start. A
	// failure here leaves everything running as it was.
	if err := a.prepare(ctx, a.obs, a.hooks, a.stop); err != nil {
		a.v.Failed(err, a.cut())
		a.v.NothingChanged()
		return false
	}
	walkErr := a.walk(ctx)
	again, ok := a.record(ctx, walkErr)
	if !ok {
		return false
	}
	return a.converge(ctx, again)
}

// lock takes the state's lock (two runs sharing the state file never
// interleave their saves) and the run's locks, and guards every
// connection with them. A lost lock stops the run: every change first
// checks the locks (so none is made after the loss is known), and the
// loss cancels what is in flight, through the returned context. release
// frees them all.
func (a *applyRun) lock(ctx context.Context) (context.Context, func(), bool) {
	unlockState := func() {}
	if !a.Options.NoLock {
		unlock, err := state.Lock(a.StatePath, Holder(a.op), a.Options.LockTimeout)
		if err != nil {
			a.v.Error(fmt.Errorf("%w\n\nAnother rayform run uses this state file. Wait for it to finish (-lock-timeout=DURATION waits for it).", err))
			return ctx, nil, false
		}
		unlockState = unlock
	}
	locks, err := a.takeLocks(ctx, a.op, a.v)
	if err != nil {
		unlockState()
		a.v.Error(err)
		return ctx, nil, false
	}
	a.locks = locks
	a.interrupted = ctx.Done()
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-locks.lost:
			a.log().Warn("cluster lock lost", "error", locks.Err())
			cancel(locks.Err())
		case <-ctx.Done():
		}
	}()
	for name, conn := range a.Conns {
		a.Conns[name] = locks.guard(name, conn)
	}
	return ctx, func() {
		cancel(nil)
		locks.release()
		unlockState()
	}, true
}

// lockErr prefers the lost lock over the error it caused.
func (a *applyRun) lockErr(err error) error {
	if lerr := a.locks.Err(); lerr != nil {
		return fmt.Errorf("%w\n\nrayform stopped: without the lock another rayform may be changing the cluster, so no further change was made. Run apply again to converge", lerr)
	}
	return err
}

// plan observes the hosts and plans (a destroy plans the removals only,
// ObserveDestroy: it depends on nothing a plan of the configuration's
// changes asks outside the hosts), checks a saved plan, shows the plan
// and asks for approval. proceed is false when the run ends here, ok
// whether it succeeded (nothing to do).
func (a *applyRun) plan(ctx context.Context) (proceed, ok bool) {
	var err error
	if a.req.Destroy {
		a.obs, a.destroyGraph, err = a.ObserveDestroy(ctx)
	} else {
		a.obs, err = a.Observe(ctx, false)
	}
	if err != nil {
		a.v.Error(a.lockErr(err))
		return false, false
	}
	p := a.obs.Result.Plan
	if err := a.checkSaved(p); err != nil {
		a.v.Error(err)
		return false, false
	}
	if err := a.v.Plan(a.obs); err != nil {
		a.v.Error(err)
		return false, false
	}
	if len(p.Errors()) > 0 {
		return false, false
	}
	if !p.HasChanges() && len(a.obs.Result.Work) == 0 {
		return false, a.nothingToDo(ctx, a.req, a.v, a.obs, a.interrupted)
	}
	if !a.req.AutoApprove && p.HasChanges() && !a.v.Confirm(ctx) {
		// The deferred releases free the locks on the way out.
		a.v.Cancelled()
		return false, false
	}
	return true, true
}

// checkSaved refuses a saved plan whose hosts, configuration or changes
// are not those of p.
func (a *applyRun) checkSaved(p *plan.Plan) error {
	if a.req.Saved == nil {
		return nil
	}
	if err := a.req.Saved.Check(a.Current(a.obs)); err != nil {
		return err
	}
	return a.req.Saved.CheckChanges(a.Planned(p).Changes)
}

// watchInterrupts installs the handler of the first interrupt, which
// closes stop, and readies the walk's hooks; the returned function
// removes the handler.
func (a *applyRun) watchInterrupts() func() {
	onInterrupt := a.req.OnInterrupt
	if onInterrupt == nil {
		onInterrupt = func(func()) {}
	}
	a.stop = make(chan struct{})
	onInterrupt(func() {
		if !a.stopped.Swap(true) {
			a.v.Interrupting()
			close(a.stop)
		}
	})
	a.hooks = &completedHooks{Hooks: a.v.Hooks(), done: map[string]bool{}}
	return func() { onInterrupt(nil) }
}

// cut reports whether an interrupt cut the run short.
func (a *applyRun) cut() bool { return a.stopped.Load() || closed(a.interrupted) }

// walk walks the plan's work in the graph's order.
func (a *applyRun) walk(ctx context.Context) error {
	g, work, done := a.applyGraph(ctx, a.obs, a.destroyGraph)
	defer done()
	return apply.Walk(ctx, g, work, a.hooks, apply.Options{Parallelism: a.ApplyParallelism(), Stop: a.stop})
}

// record re-observes the hosts whatever the walk's outcome and records in
// the state what they show; it reports the walk's failure, a lost lock,
// and what kept the state from being saved. again is the hosts as the
// walk left them.
func (a *applyRun) record(ctx context.Context, walkErr error) (again *Observation, ok bool) {
	// A -replace is done once replaced.
	a.Options.Replace = nil
	again, againErr := a.reobserve(ctx, a.interrupted, a.req.Destroy)
	saveErr := a.recordState(a.obs, again, a.hooks.completed())
	if saveErr != nil {
		a.v.Error(fmt.Errorf("saving state: %w", saveErr))
	}
	// An interrupt (Ctrl-C once: stop; twice: the context) is not a
	// failure to diagnose: what it cut short is listed, nothing more.
	if lerr := a.locks.Err(); lerr != nil {
		a.v.Failed(walkErr, a.cut())
		a.v.LockLost(a.lockErr(lerr))
		return nil, false
	}
	if walkErr != nil {
		a.v.Failed(walkErr, a.cut())
		return nil, false
	}
	if saveErr != nil {
		return nil, false
	}
	if againErr != nil {
		a.v.Error(fmt.Errorf("re-observing after apply: %w", againErr))
		return nil, false
	}
	return again, true
}

// converge plans again against the state as now recorded: a successful
// walk left nothing to change. It records the fabric and waits for what
// is still starting.
func (a *applyRun) converge(ctx context.Context, again *Observation) bool {
	if a.req.Destroy {
		a.DestroyPlan(again)
	} else {
		again.Result = Plan(a.Kinds, a.planInput(again.Config, again.Facts))
		if err := a.narrow(again); err != nil {
			a.v.Error(err)
			return false
		}
	}
	if err := notConverged(a.op, again.Result.Plan); err != nil {
		a.v.Error(err)
		return false
	}
	if a.req.Destroy && a.reportUnreached(a.v, again) {
		return false
	}
	if err := a.recordFabric(again); err != nil {
		a.v.Error(fmt.Errorf("saving state: %w", err))
		return false
	}
	if !a.req.Destroy {
		// A resource the walk did not touch may still be starting.
		if err := a.awaitStarting(ctx, again, a.hooks, a.stop); err != nil {
			a.v.Failed(err, a.cut())
			return false
		}
	}
	a.v.Complete(a.obs.Result.Plan.Counts(), again, true)
	return true
}

// notConverged is the error of a plan that still has changes after op.
func notConverged(op string, p *plan.Plan) error {
	if !p.HasChanges() {
		return nil
	}
	var left []string
	for _, ch := range p.Changes {
		if ch.Action != plan.NoOp {
			left = append(left, fmt.Sprintf("%s (%s: %s)", ch.Address, ch.Action, strings.Join(ch.Reasons, "; ")))
		}
	}
	return fmt.Errorf("%s did not converge: after it, the plan still has changes:\n  %s", op, strings.Join(left, "\n  "))
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

// applyGraph turns the plan's work into the engine's resources, ordered by
// the configuration's graph; removed resources are destroyed in the
// destroy order (OrderDestroy), the kinds' early steps run before the
// resources they name, and each resource waits for those its work is
// after (kind.Work.After). A destroy walks destroyGraph. done ends what
// the kinds readied for the walk.
func (r *Runner) applyGraph(ctx context.Context, obs *Observation, destroyGraph *dag.Graph) (g *dag.Graph, work map[string]*apply.Resource, done func()) {
	g = obs.Config.Graph()
	if destroyGraph != nil {
		g = destroyGraph
	}
	ws := r.walkSteps(ctx, obs)
	work = map[string]*apply.Resource{}
	for addr, w := range obs.Result.Work {
		work[addr] = &apply.Resource{Address: addr, Action: w.Action, Steps: ws.steps[addr]}
		if w.Action == plan.Delete && destroyGraph == nil {
			g.Add(addr)
		}
	}
	if destroyGraph != nil {
		return g, work, ws.close
	}
	OrderDestroy(g, obs.Result.Work)
	for _, e := range ws.early {
		work[e.Node] = &apply.Resource{Address: e.Address, Action: e.Action, Steps: e.Steps, Ahead: true}
		g.Add(e.Node)
		g.Connect(e.Before, e.Node)
	}
	for _, addr := range slices.Sorted(maps.Keys(obs.Result.Work)) {
		for _, dep := range obs.Result.Work[addr].After {
			if g.Has(addr) && g.Has(dep) {
				g.Connect(addr, dep)
			}
		}
	}
	return g, work, ws.close
}

// prepare proves, before the walk changes anything, that what it will
// start can start: every command line within its host's limits
// (checkPrepare), then every resource's PrepareSteps (read-only: images
// pulled while the old containers keep running). The first Ctrl-C (stop)
// cancels it: nothing was changed yet.
func (r *Runner) prepare(ctx context.Context, obs *Observation, hooks apply.Hooks, stop <-chan struct{}) error {
	if err := r.checkPrepare(obs); err != nil {
		return err
	}
	var rs []*apply.Resource
	env := r.env(obs)
	for _, addr := range slices.Sorted(maps.Keys(obs.Result.Work)) {
		w := obs.Result.Work[addr]
		if steps := PrepareStepsOf(r.Kinds, env, w); len(steps) > 0 {
			rs = append(rs, &apply.Resource{Address: addr, Action: w.Action, Steps: steps})
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
	env := r.env(obs)
	for _, w := range r.Starting(obs) {
		rs = append(rs, &apply.Resource{Address: w.Address, Action: plan.NoOp, Steps: awaitStepsOf(r.Kinds, env, w)})
	}
	return r.runReadOnly(ctx, rs, hooks, stop)
}

// reportUnreached tells the view, after a destroy, of every host it could
// not reach and the resources left there, which the state keeps; true
// when there is any: the destroy failed.
func (r *Runner) reportUnreached(v View, obs *Observation) bool {
	un := Unreached(obs.Facts, obs.Result.Work)
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
