package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/dataplane"
)

// applyTimeouts are how long apply waits for Ray; tests shorten them.
type applyTimeouts struct {
	poll     time.Duration
	rayReady time.Duration
}

func defaultApplyTimeouts() applyTimeouts {
	return applyTimeouts{poll: time.Second, rayReady: 2 * time.Minute}
}

func runApply(ctx context.Context, c *cli, args []string) int {
	var opts runOptions
	fs := newFlagSet(c, "apply", "apply [options] [PLAN]\n\n  Observe the hosts, show the plan, ask for confirmation, and make the hosts\n  match the configuration, verifying every step. With PLAN (from plan -out),\n  apply exactly that plan, or refuse if the hosts changed since.")
	opts.register(fs)
	autoApprove := fs.Bool("auto-approve", false, "skip the interactive confirmation")
	opts.registerLock(fs, "applying")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(c.stderr, "Error: apply takes at most one argument, a saved plan (got %q)\n", fs.Args())
		return exitError
	}
	planPath := fs.Arg(0)
	if !*autoApprove && planPath == "" {
		if why := noPromptReason(&opts); why != "" {
			fmt.Fprintf(c.stderr, "Error: Plan file or auto-approve required\n\nrayform cannot ask for interactive approval when %s. Use -auto-approve or apply a saved plan.\n", why)
			return exitError
		}
	}
	var saved *planfile.File
	if planPath != "" {
		f, err := planfile.Read(planPath)
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		saved = f
		if len(opts.targets) > 0 || len(opts.replace) > 0 {
			fmt.Fprintln(c.stderr, "Error: -target and -replace cannot be given with a saved plan: the plan already records its own")
			return exitError
		}
		opts.targets = append(opts.targets, f.Targets...)
		opts.replace = append(opts.replace, f.Replace...)
	}
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	return s.apply(ctx, applyRequest{autoApprove: *autoApprove || saved != nil, saved: saved, destroy: saved != nil && saved.Destroy, timeouts: defaultApplyTimeouts()})
}

// registerLock registers -lock and -lock-timeout (apply and destroy).
func (o *runOptions) registerLock(fs *flag.FlagSet, doing string) {
	fs.BoolFunc("lock", "hold each cluster's lock on its head host while "+doing+" (default true; -lock=false to skip)", func(v string) error {
		b, err := strconv.ParseBool(v)
		o.noLock = !b
		return err
	})
	fs.DurationVar(&o.lockTimeout, "lock-timeout", 0, "wait up to `DURATION` for a lock another rayform holds (default: fail at once)")
}

type applyRequest struct {
	autoApprove bool
	saved       *planfile.File
	destroy     bool
	timeouts    applyTimeouts
}

// apply runs the whole apply (or destroy): lock, observe, plan, confirm,
// walk, save state, re-observe.
func (s *session) apply(ctx context.Context, req applyRequest) int {
	c := s.c
	s.timeouts = req.timeouts
	// Every host's handshake overlaps with taking the locks on the heads:
	// without this the workers would only be dialled once the locks are
	// held, and a no-op apply would cost a handshake more than plan.
	s.connectAhead(ctx)
	op := "apply"
	if req.destroy {
		op = "destroy"
	}
	// Two runs sharing the state file never interleave their saves.
	if !s.opts.noLock {
		unlockState, err := state.Lock(s.statePath(), lockHolder(op), s.opts.lockTimeout)
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n\nAnother rayform run uses this state file. Wait for it to finish (-lock-timeout=DURATION waits for it).\n", err)
			return exitError
		}
		defer unlockState()
	}
	locks, err := s.lockClusters(ctx, op)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
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
			s.c.log.Warn("cluster lock lost", "error", locks.Err())
			cancel(locks.Err())
		case <-ctx.Done():
		}
	}()
	for name, conn := range s.conns {
		s.conns[name] = locks.guard(name, conn)
	}
	// lockErr prefers the lost lock over the error it caused.
	lockErr := func(err error) error {
		if lerr := locks.Err(); lerr != nil {
			return fmt.Errorf("%w\n\nrayform stopped: without the lock another rayform may be changing the cluster, so no further change was made. Run apply again to converge", lerr)
		}
		return err
	}

	obs, err := s.observeAndPlan(ctx, false)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", lockErr(err))
		return exitError
	}
	var destroyGraph *dag.Graph
	if req.destroy {
		destroyGraph = s.destroyPlan(obs)
	}
	p := obs.result.Plan
	if req.saved != nil {
		cur := current(s, obs)
		if err := req.saved.Check(cur); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		if err := req.saved.CheckChanges(planned(s.opts, p).Changes); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
	}
	if err := renderPlan(c, s.opts, s, obs, ""); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	if len(p.Errors()) > 0 {
		return exitError
	}
	if !p.HasChanges() && len(obs.result.Work) == 0 {
		// Nothing to do: the state still records what the hosts show (an
		// earlier run may have been cut short before it could).
		if req.saved == nil && len(s.opts.targets) == 0 {
			if err := s.recordState(obs, obs, nil); err != nil {
				fmt.Fprintf(c.stderr, "Error: saving state: %v\n", err)
				return exitError
			}
			// And each node's fabric address, which output reads.
			if err := s.recordFabric(obs); err != nil {
				fmt.Fprintf(c.stderr, "Error: saving state: %v\n", err)
				return exitError
			}
		}
		if req.destroy && s.reportUnreached(obs) {
			return exitError
		}
		// Nothing to change is no success while a serve does not serve
		// yet: wait for it, up to its ready_timeout.
		if !req.destroy {
			if err := s.awaitStarting(ctx, obs, s.hooks(), nil); err != nil {
				s.reportFailure(err, interruptedNow(interrupted), op)
				return exitError
			}
		}
		if !s.opts.json {
			verb := "Apply"
			if req.destroy {
				verb = "Destroy"
			}
			fmt.Fprintf(c.stdout, "\n%s complete! Resources: 0 added, 0 changed, 0 destroyed.\n", verb)
			s.printOutputs(obs)
		}
		return exitOK
	}
	if !req.autoApprove && p.HasChanges() {
		if !s.confirm(ctx, req.destroy) {
			// The deferred releases free the locks on the way out.
			if req.destroy {
				fmt.Fprintln(c.stderr, "\nDestroy cancelled.")
			} else {
				fmt.Fprintln(c.stderr, "\nApply cancelled.")
			}
			return exitError
		}
	}

	stop := make(chan struct{})
	var stopped atomic.Bool
	c.setInterruptHandler(func() {
		if !stopped.Swap(true) {
			fmt.Fprintln(c.stderr, "\nInterrupt received.\nPlease wait for rayform to exit or data loss may occur.\nGracefully shutting down...")
			close(stop)
		}
	})
	defer c.setInterruptHandler(nil)

	hooks := &completedHooks{Hooks: s.hooks(), done: map[string]bool{}}
	// Before the first change: every command line within the hosts'
	// limits, every image on every node that starts a container, with Ray
	// in it. A failure here leaves everything running as it was.
	if err := s.prepare(ctx, obs, hooks, stop); err != nil {
		s.reportFailure(err, stopped.Load() || interruptedNow(interrupted), op)
		fmt.Fprintf(c.stderr, "\nNothing was changed: rayform stops before removing or stopping anything when what it would start cannot start.\n")
		return exitError
	}

	checks := resources.NewCheckStarts(ctx, s.conns, obs.result.Work, dataplane.Options{})
	g, work := s.applyGraph(obs, destroyGraph, checks)
	walkErr := apply.Walk(ctx, g, work, hooks, apply.Options{Parallelism: s.applyParallelism(), Stop: stop})
	checks.Close()
	// Re-observe whatever the outcome: the state records what the hosts
	// show, and a successful walk must have converged.
	// A -replace is done once replaced.
	s.opts.replace = nil
	again, againErr := s.reobserve(ctx, interrupted)
	saveErr := s.recordState(obs, again, hooks.completed())
	if saveErr != nil {
		fmt.Fprintf(c.stderr, "Error: saving state: %v\n", saveErr)
	}
	// An interrupt (Ctrl-C once: stop; twice: the context) is not a
	// failure to diagnose: what it cut short is listed, nothing more.
	cut := stopped.Load() || interruptedNow(interrupted)
	if lerr := locks.Err(); lerr != nil {
		s.reportFailure(walkErr, cut, op)
		fmt.Fprintf(c.stderr, "\nError: %v\n", lockErr(lerr))
		return exitError
	}
	if walkErr != nil {
		s.reportFailure(walkErr, cut, op)
		return exitError
	}
	if saveErr != nil {
		return exitError
	}
	if againErr != nil {
		fmt.Fprintf(c.stderr, "Error: re-observing after apply: %v\n", againErr)
		return exitError
	}
	// The plan against the state as now recorded.
	again.result = resources.Plan(resources.PlanInput{Config: again.cfg, Facts: again.facts, State: s.st, Project: s.project})
	if len(s.opts.targets) > 0 {
		if err := s.applyTargets(again.cfg, again.result); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
	}
	if req.destroy {
		s.destroyPlan(again)
	}
	if again.result.Plan.HasChanges() {
		var left []string
		for _, ch := range again.result.Plan.Changes {
			if ch.Action != plan.NoOp {
				left = append(left, fmt.Sprintf("%s (%s: %s)", ch.Address, ch.Action, strings.Join(ch.Reasons, "; ")))
			}
		}
		fmt.Fprintf(c.stderr, "Error: %s did not converge: after it, the plan still has changes:\n  %s\n", op, strings.Join(left, "\n  "))
		return exitError
	}
	if req.destroy && s.reportUnreached(again) {
		return exitError
	}
	if err := s.recordFabric(again); err != nil {
		fmt.Fprintf(c.stderr, "Error: saving state: %v\n", err)
		return exitError
	}
	if !req.destroy {
		// A serve the walk did not touch may still be starting.
		if err := s.awaitStarting(ctx, again, hooks, stop); err != nil {
			s.reportFailure(err, stopped.Load() || interruptedNow(interrupted), op)
			return exitError
		}
	}
	counts := p.Counts()
	if !s.opts.json {
		verb := "Apply"
		if req.destroy {
			verb = "Destroy"
		}
		fmt.Fprintf(c.stdout, "\n%s complete! Resources: %d added, %d changed, %d destroyed.\n", verb, counts.Add, counts.Change, counts.Destroy)
		s.printOutputs(again)
	} else {
		e := plan.NewEvent(time.Now(), "info", "change_summary", fmt.Sprintf("Apply complete! Resources: %d added, %d changed, %d destroyed.", counts.Add, counts.Change, counts.Destroy))
		e["changes"] = map[string]any{"add": counts.Add, "change": counts.Change, "remove": counts.Destroy, "operation": "apply"}
		plan.WriteEvent(c.stdout, e)
	}
	return exitOK
}

// destroyPlan replaces obs's plan with the destruction of every resource
// (resources.DestroyWork), narrowed with -target to the targets and what
// depends on them, as Terraform's destroy -target does: destroying a
// vllm_serve never takes its ray_cluster with it. It returns the order of
// the walk.
func (s *session) destroyPlan(obs *observed) *dag.Graph {
	res, g := resources.DestroyWork(resources.PlanInput{Config: obs.cfg, Facts: obs.facts, State: s.st, Project: s.project})
	obs.result = res
	if len(s.opts.targets) == 0 {
		return g
	}
	keep := map[string]bool{}
	for _, t := range s.opts.targets {
		keep[t] = true
	}
	for _, n := range obs.cfg.Graph().WithDependents(s.opts.targets) {
		keep[n] = true
	}
	keepOnly(res, keep)
	return g
}

// keepOnly drops from res every change and piece of work not in keep.
func keepOnly(res *resources.Result, keep map[string]bool) {
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

// reobserve observes the hosts after the walk. A run whose lock was lost
// still observes (read-only, bounded by a minute); one cut short by a
// second interrupt (interrupted closed) does not.
func (s *session) reobserve(ctx context.Context, interrupted <-chan struct{}) (*observed, error) {
	select {
	case <-interrupted:
		return nil, errors.New("interrupted")
	default:
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
	}
	return s.observeAndPlan(ctx, false)
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

// connectAhead starts dialling, in the background, every host of the
// session (the configuration's nodes and the state's hosts: exactly the
// hosts apply observes); the first command on each connection waits for
// its dial.
func (s *session) connectAhead(ctx context.Context) {
	for _, conn := range s.conns {
		go func() { _ = transport.Connect(ctx, conn) }()
	}
}

// noPromptReason says why apply or destroy cannot ask for approval ("" when
// it can): -json owns stdout, -input=false forbids prompts.
func noPromptReason(opts *runOptions) string {
	switch {
	case opts.json:
		return "-json is set"
	case !opts.input:
		return "-input=false is set"
	}
	return ""
}

// confirm asks Terraform's question; only "yes" approves. An interrupt
// (ctx ends: the first Ctrl-C at the prompt, or a lost lock) answers no at
// once, without waiting for a line.
func (s *session) confirm(ctx context.Context, destroy bool) bool {
	c := s.c
	switch {
	case destroy && len(s.opts.targets) > 0:
		fmt.Fprint(c.stdout, "\nDo you really want to destroy the targeted resources?\n  rayform will destroy the resources shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	case destroy:
		fmt.Fprint(c.stdout, "\nDo you really want to destroy all resources?\n  rayform will destroy all the resources shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	default:
		fmt.Fprint(c.stdout, "\nDo you want to perform these actions?\n  rayform will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	}
	answer := make(chan string, 1)
	go func() {
		// Left blocked on stdin after an interrupt: the process exits.
		line, err := bufio.NewReader(c.stdin).ReadString('\n')
		if err != nil && line == "" {
			fmt.Fprintln(c.stdout)
		}
		answer <- line
	}()
	select {
	case line := <-answer:
		return strings.TrimSpace(line) == "yes"
	case <-ctx.Done():
		fmt.Fprintln(c.stdout)
		return false
	}
}

// applyGraph turns the plan's work into the engine's resources, ordered by
// the configuration's graph; removed resources are destroyed in
// resources.OrderDestroy's order (serves first).
//
// checks start the ranks of the data-plane checks as their containers start.
func (s *session) applyGraph(obs *observed, destroyGraph *dag.Graph, checks *resources.CheckStarts) (*dag.Graph, map[string]*apply.Resource) {
	g := obs.cfg.Graph()
	if destroyGraph != nil {
		g = destroyGraph
	}
	serveNodes := map[string][]string{}
	for _, sv := range obs.cfg.Serves {
		if rc := obs.cfg.RayClusters[sv.Cluster]; rc != nil {
			serveNodes[sv.Addr] = rc.Nodes()
		}
	}
	work := map[string]*apply.Resource{}
	for addr, w := range obs.result.Work {
		env := s.stepEnv(obs, w)
		env.ServeNodes = serveNodes
		env.Checks = checks
		// prepare ran the image and Ray checks.
		env.Prepared = true
		work[addr] = &apply.Resource{Address: addr, Action: w.Action, Steps: resources.Steps(env, w)}
		if w.Action == plan.Delete && destroyGraph == nil {
			g.Add(addr)
		}
	}
	if destroyGraph == nil {
		resources.OrderDestroy(g, obs.result.Work)
		s.stopServesFirst(obs, g, work)
	}
	return g, work
}

// stepEnv is what the steps of w need from the session.
func (s *session) stepEnv(obs *observed, w *resources.Work) *resources.StepEnv {
	return &resources.StepEnv{
		Conns:           s.conns,
		Project:         s.project,
		Poll:            s.timeouts.poll,
		RayReadyTimeout: s.timeouts.rayReady,
		Parallelism:     s.applyParallelism(),
		Diagnose:        resources.DiagnoseContext(obs.cfg, obs.facts, obs.result.Addrs, w),
		Log:             s.c.log.Named("apply"),
		State:           s.st, // the images' answers to the architecture check
	}
}

// prepare proves, before the walk changes anything, that what it will
// start can start: every command line within the hosts' limits
// (resources.CheckCommandLimits), and every resource's PrepareSteps (the
// image on every node that starts a container, pulled in parallel while
// the old containers keep running, and Ray in it). The first Ctrl-C
// (stop) cancels it: nothing was changed yet.
func (s *session) prepare(ctx context.Context, obs *observed, hooks apply.Hooks, stop <-chan struct{}) error {
	addrs := slices.Sorted(maps.Keys(obs.result.Work))
	var errs []error
	for _, addr := range addrs {
		if w := obs.result.Work[addr]; w.Action != plan.NoOp && w.Action != plan.Delete {
			if err := resources.CheckCommandLimits(w, s.project); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var rs []*apply.Resource
	for _, addr := range addrs {
		w := obs.result.Work[addr]
		if steps := resources.PrepareSteps(s.stepEnv(obs, w), w); len(steps) > 0 {
			rs = append(rs, &apply.Resource{Address: addr, Action: w.Action, Steps: steps})
		}
	}
	return s.runReadOnly(ctx, rs, hooks, stop)
}

// runReadOnly runs steps that change nothing the hosts run (apply.Prepare)
// and stops them at once on the first Ctrl-C (stop), as nothing is left
// half done.
func (s *session) runReadOnly(ctx context.Context, rs []*apply.Resource, hooks apply.Hooks, stop <-chan struct{}) error {
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
	return apply.Prepare(ctx, rs, hooks, apply.Options{Parallelism: s.applyParallelism(), Stop: stop})
}

// awaitStarting waits for every serve of the plan (all of the
// configuration's, or the targeted ones) that runs but does not answer
// yet, up to its ready_timeout, and checks /health and /v1/models: apply
// succeeds only when every serve it leaves serves, whether or not it
// changed anything (resources.StartingServes).
func (s *session) awaitStarting(ctx context.Context, obs *observed, hooks apply.Hooks, stop <-chan struct{}) error {
	var rs []*apply.Resource
	for _, w := range s.startingServes(obs) {
		rs = append(rs, &apply.Resource{Address: w.Address, Action: plan.NoOp, Steps: resources.AwaitSteps(s.stepEnv(obs, w), w)})
	}
	return s.runReadOnly(ctx, rs, hooks, stop)
}

// startingServes are the serves of obs's plan (all of the configuration's,
// or the targeted ones) that run but do not answer yet.
func (s *session) startingServes(obs *observed) []*resources.Work {
	planned := map[string]bool{}
	for _, ch := range obs.result.Plan.Changes {
		planned[ch.Address] = true
	}
	var out []*resources.Work
	for _, w := range resources.StartingServes(resources.PlanInput{Config: obs.cfg, Facts: obs.facts, State: s.st, Project: s.project}) {
		if planned[w.Address] {
			out = append(out, w)
		}
	}
	return out
}

// stopServesFirst stops each serve that is replaced along with its
// cluster's containers before the cluster changes: a worker under a
// running serve must not go away (nor restart) under it. The stop is a
// node of its own, "ADDRESS#stop", that the cluster depends on; the
// serve's own stop step then finds the process gone.
func (s *session) stopServesFirst(obs *observed, g *dag.Graph, work map[string]*apply.Resource) {
	for _, sv := range obs.cfg.Serves {
		w := obs.result.Work[sv.Addr]
		rc := obs.cfg.RayClusters[sv.Cluster]
		if w == nil || w.Action != plan.Replace || rc == nil {
			continue
		}
		cw := obs.result.Work[rc.Addr]
		if cw == nil || cw.Action == plan.NoOp {
			continue
		}
		r := work[sv.Addr]
		if r == nil || len(r.Steps) == 0 {
			continue
		}
		env := &resources.StepEnv{Conns: s.conns, Project: s.project, Poll: s.timeouts.poll, Parallelism: s.applyParallelism(), Log: s.c.log.Named("apply")}
		steps := resources.ServeStopSteps(env, w)
		if len(steps) == 0 {
			continue
		}
		stop := sv.Addr + "#stop"
		work[stop] = &apply.Resource{Address: sv.Addr, Action: plan.Replace, Steps: steps, Ahead: true}
		g.Add(stop)
		g.Connect(rc.Addr, stop)
	}
}

// hooks renders apply progress as text or NDJSON.
func (s *session) hooks() apply.Hooks {
	if s.opts.json {
		return &jsonHooks{w: s.c.stdout, now: time.Now}
	}
	return newTextHooks(s.c.stdout, s.c.color)
}

// recordState makes the state record what the hosts show after the run,
// whatever way it ended: again is the hosts re-observed after the walk.
// Where that observation is missing (the run was cut short), only the
// resources the walk completed are recorded (created or updated, or
// forgotten when destroyed); nothing that did not happen is. It saves the
// state only when it changed.
func (s *session) recordState(obs, again *observed, completed map[string]bool) error {
	before, err := json.Marshal(s.st.Resources)
	if err != nil {
		return err
	}
	if again != nil {
		s.reconcileState(again, completed)
	} else {
		for addr, w := range obs.result.Work {
			if !completed[addr] {
				continue
			}
			if w.Action == plan.Delete {
				s.st.Remove(addr)
				continue
			}
			r := state.Resource{Type: w.Type, AppliedAt: time.Now()}
			if w.Cluster != nil {
				r.Container = w.Cluster.Name
				if len(w.Cluster.Specs) > 0 {
					r.Container = w.Cluster.Specs[0].Name
				}
			}
			if w.Serve != nil {
				r.Container = w.Serve.Spec.Container
			}
			old, _ := s.st.Get(addr)
			for _, node := range w.Hosts {
				if h, ok := s.stateHost(obs.cfg, old, node); ok {
					r.Hosts = append(r.Hosts, h)
				}
			}
			s.st.Set(addr, r)
		}
	}
	after, err := json.Marshal(s.st.Resources)
	if err != nil {
		return err
	}
	if string(before) == string(after) && !s.st.ImagesChanged() {
		return nil
	}
	return s.saveState()
}

// reconcileState sets the state to the project's resources the observation
// shows: each present resource on the nodes holding it, each absent one
// forgotten, except where a node it was recorded on could not be observed
// (what that node holds is unknown, so its record stays). A resource the
// walk completed (created, updated or replaced) was applied now.
func (s *session) reconcileState(again *observed, completed map[string]bool) {
	in := resources.PlanInput{Config: again.cfg, Facts: again.facts, State: s.st, Project: s.project}
	present, unknown := resources.PresentResources(in)
	for _, addr := range s.st.Addresses() {
		if _, ok := present[addr]; ok {
			continue
		}
		// Gone from every node observed: what stays recorded are the
		// nodes that could not be, which may still hold it.
		old, _ := s.st.Get(addr)
		var keep []state.Host
		for _, h := range old.Hosts {
			if unknown[h.Node] || again.facts.Hosts[h.Node] == nil {
				keep = append(keep, h)
			}
		}
		if len(keep) == 0 {
			s.st.Remove(addr)
		} else if len(keep) < len(old.Hosts) {
			old.Hosts = keep
			s.st.Set(addr, old)
		}
	}
	for addr, p := range present {
		old, had := s.st.Get(addr)
		r := state.Resource{Type: p.Type, Container: p.Container, Head: p.Head, AppliedAt: old.AppliedAt}
		if !had || r.AppliedAt.IsZero() || completed[addr] {
			r.AppliedAt = time.Now()
		}
		for _, node := range p.Nodes {
			if h, ok := s.stateHost(again.cfg, old, node); ok {
				r.Hosts = append(r.Hosts, h)
			}
		}
		// A node recorded before but not observed now may still hold it.
		for _, h := range old.Hosts {
			if (unknown[h.Node] || again.facts.Hosts[h.Node] == nil) && !slices.Contains(p.Nodes, h.Node) {
				r.Hosts = append(r.Hosts, h)
			}
		}
		if len(r.Hosts) > 0 {
			s.st.Set(addr, r)
		}
	}
}

// stateHost returns the SSH coordinates of node for a state record: from
// the configuration, else from the resource's earlier record. A node known
// to neither cannot be reached again and is not recorded.
func (s *session) stateHost(cfg *resources.Config, old state.Resource, node string) (state.Host, bool) {
	var prev state.Host
	for _, h := range old.Hosts {
		if h.Node == node {
			prev = h
		}
	}
	if n := cfg.Nodes[node]; n != nil {
		h := state.Host{Node: node, Host: n.Host, User: n.User, Port: n.Port, Bastion: n.Bastion}
		if h.Host == prev.Host {
			h.FabricAddress, h.FabricInterface = prev.FabricAddress, prev.FabricInterface
		}
		return h, h.Host != ""
	}
	if prev.Host != "" {
		return prev, true
	}
	for _, addr := range s.st.Addresses() {
		r, _ := s.st.Get(addr)
		for _, h := range r.Hosts {
			if h.Node == node && h.Host != "" {
				return state.Host{Node: node, Host: h.Host, User: h.User, Port: h.Port, Bastion: h.Bastion}, true
			}
		}
	}
	return state.Host{}, false
}

// saveState writes the state file (atomically, 0600).
func (s *session) saveState() error {
	path := s.statePath()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return s.st.Save(path)
}

// statePath is the state file's path.
func (s *session) statePath() string { return s.c.statePath(s.opts.stateFile) }

// recordFabric writes down each applied node's fabric address and
// interface as the converged hosts show them, so the next plan can assume
// them (see resources.ObserveSpec). It saves the state only when they
// changed.
func (s *session) recordFabric(obs *observed) error {
	addrs, ifaces := resources.FabricAddrs(obs.cfg, obs.facts)
	changed := false
	for _, addr := range s.st.Addresses() {
		r, _ := s.st.Get(addr)
		dirty := false
		for i, h := range r.Hosts {
			a, ok := addrs[h.Node]
			if !ok || !a.IsValid() {
				continue
			}
			if h.FabricAddress != a.String() || h.FabricInterface != ifaces[h.Node] {
				r.Hosts[i].FabricAddress, r.Hosts[i].FabricInterface = a.String(), ifaces[h.Node]
				dirty = true
			}
		}
		if dirty {
			s.st.Set(addr, r)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return s.saveState()
}

func unwrapAll(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unwrapAll(e)...)
		}
		return out
	}
	return []error{err}
}

// reportUnreached tells, after a destroy, of every host it could not
// reach and the resources left there (resources.Unreached), which the
// state keeps; true when there is any: the destroy failed.
func (s *session) reportUnreached(obs *observed) bool {
	un := resources.Unreached(obs.facts, obs.result.Work)
	if len(un) == 0 {
		return false
	}
	var lines []string
	nodes := map[string]bool{}
	for _, u := range un {
		lines = append(lines, fmt.Sprintf("%s on %s: %s", u.Address, u.Node, u.Why))
		nodes[u.Node] = true
	}
	fmt.Fprintf(s.c.stderr, "\nError: destroy could not reach every host; what these resources have there is left, and the state keeps them:\n  %s\n\nMake %s reachable, then run rayform destroy again.\n",
		strings.Join(lines, "\n  "), strings.Join(slices.Sorted(maps.Keys(nodes)), ", "))
	return true
}

// interruptedNow reports whether the second Ctrl-C came (ch closed).
func interruptedNow(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// reportFailure prints each failed resource's error (which carries the
// classified cause, its evidence and the fix) once. When the run was
// interrupted, what the interrupt cut short or kept from starting is no
// failure: it is listed in one message, with what to do (op is "apply" or
// "destroy").
func (s *session) reportFailure(err error, interrupted bool, op string) {
	c := s.c
	var cut []string
	for _, e := range unwrapAll(err) {
		var se *apply.StepError
		if errors.As(e, &se) && errors.Is(se.Err, dag.ErrSkipped) {
			continue
		}
		if errors.Is(e, dag.ErrSkipped) {
			continue
		}
		if interrupted && (errors.Is(e, context.Canceled) || errors.Is(e, apply.ErrInterrupted)) {
			switch {
			case se != nil && errors.Is(e, apply.ErrInterrupted):
				cut = append(cut, fmt.Sprintf("%s: %s: %v", se.Address, se.Step, apply.ErrInterrupted))
			case se != nil:
				cut = append(cut, fmt.Sprintf("%s: %s: cut short", se.Address, se.Step))
			}
			// A node the walk never reached (an output, a resource with
			// nothing to do) is not worth a line.
			continue
		}
		msg := e.Error()
		if se != nil {
			msg = fmt.Sprintf("%s: %s failed:\n\n%s", se.Address, se.Step, se.Err.Error())
		}
		fmt.Fprintf(c.stderr, "\n╷\n│ Error: %s\n╵\n", strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n│ "))
	}
	if interrupted {
		msg := "Error: " + op + " interrupted"
		if len(cut) > 0 {
			msg += ":\n  " + strings.Join(cut, "\n  ")
		}
		fmt.Fprintf(c.stderr, "\n%s\n\nRun rayform %s again to finish.\n", msg, op)
	}
}

// printOutputs prints the outputs after a successful apply.
func (s *session) printOutputs(obs *observed) {
	if len(obs.result.Plan.Outputs) == 0 {
		return
	}
	fmt.Fprintf(s.c.stdout, "\nOutputs:\n\n")
	for _, o := range obs.result.Plan.Outputs {
		v := "(sensitive value)"
		if !o.Sensitive {
			v = plan.FormatValue(o.Value)
		}
		fmt.Fprintf(s.c.stdout, "%s = %s\n", o.Name, v)
	}
}
