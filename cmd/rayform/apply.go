package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources"
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
	lockFlag := fs.Bool("lock", true, "hold each cluster's lock on its head host while applying (-lock=false to skip)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	opts.noLock = !*lockFlag
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
	release, err := s.lockClusters(ctx)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	defer release()

	obs, err := s.observeAndPlan(ctx, false)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
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
		if !s.confirm(req.destroy) {
			fmt.Fprintln(c.stderr, "\nApply cancelled.")
			return exitError
		}
	}

	stop := make(chan struct{})
	var stopped bool
	c.setInterruptHandler(func() {
		if !stopped {
			stopped = true
			fmt.Fprintln(c.stderr, "\nInterrupt received.\nPlease wait for rayform to exit or data loss may occur.\nGracefully shutting down...")
			close(stop)
		}
	})
	defer c.setInterruptHandler(nil)

	g, work := s.applyGraph(obs, destroyGraph)
	hooks := s.hooks()
	walkErr := apply.Walk(ctx, g, work, hooks, apply.Options{Parallelism: s.applyParallelism(), Stop: stop})
	if err := s.recordState(obs, walkErr); err != nil {
		fmt.Fprintf(c.stderr, "Error: saving state: %v\n", err)
	}
	if walkErr != nil {
		s.reportFailure(walkErr)
		return exitError
	}

	// Converged? Re-observe: anything left to do is an error. A -replace
	// is done once replaced.
	s.opts.replace = nil
	again, err := s.observeAndPlan(ctx, false)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: re-observing after apply: %v\n", err)
		return exitError
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
		fmt.Fprintf(c.stderr, "Error: apply did not converge: after it, the plan still has changes:\n  %s\n", strings.Join(left, "\n  "))
		return exitError
	}
	if err := s.recordFabric(again); err != nil {
		fmt.Fprintf(c.stderr, "Error: saving state: %v\n", err)
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

// connectAhead starts dialling, in the background, every host of the
// session (the configuration's nodes and the state's hosts: exactly the
// hosts apply observes); the first command on each connection waits for
// its dial.
func (s *session) connectAhead(ctx context.Context) {
	for _, conn := range s.conns {
		go func() { _ = transport.Connect(ctx, conn) }()
	}
}

// lockClusters takes every cluster's lock on its head host. A held lock
// fails at once, naming the holder.
func (s *session) lockClusters(ctx context.Context) (func(), error) {
	if s.opts.noLock {
		return func() {}, nil
	}
	holder := lockHolder()
	var held []*lock.Lock
	release := func() {
		for _, l := range held {
			l.Release()
		}
	}
	names := make([]string, 0, len(s.cfg.RayClusters))
	for name := range s.cfg.RayClusters {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rc := s.cfg.RayClusters[name]
		conn, ok := s.conns[rc.Head]
		if !ok {
			continue
		}
		l, err := lock.Acquire(ctx, conn, s.project+"-"+name, holder)
		if err != nil {
			release()
			if errors.Is(err, lock.ErrHeld) {
				return nil, fmt.Errorf("%w\n\nAnother rayform is applying to ray_cluster.%s. Wait for it to finish (the lock is released when its SSH session ends), or run with -lock=false if you are sure it is gone", err, name)
			}
			return nil, fmt.Errorf("locking ray_cluster.%s on %s: %w", name, rc.Head, err)
		}
		held = append(held, l)
	}
	return release, nil
}

func lockHolder() string {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s pid=%d rayform apply", who, host, os.Getpid())
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

// confirm asks Terraform's question; only "yes" approves.
func (s *session) confirm(destroy bool) bool {
	c := s.c
	if destroy {
		fmt.Fprint(c.stdout, "\nDo you really want to destroy all resources?\n  rayform will destroy all the resources shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	} else {
		fmt.Fprint(c.stdout, "\nDo you want to perform these actions?\n  rayform will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	}
	line, err := bufio.NewReader(c.stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(c.stdout)
		return false
	}
	return strings.TrimSpace(line) == "yes"
}

// applyGraph turns the plan's work into the engine's resources, ordered by
// the configuration's graph; removed resources are destroyed serves first.
func (s *session) applyGraph(obs *observed, destroyGraph *dag.Graph) (*dag.Graph, map[string]*apply.Resource) {
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
	var deletedServes, deletedClusters []string
	for addr, w := range obs.result.Work {
		env := &resources.StepEnv{
			Conns:           s.conns,
			Project:         s.project,
			Poll:            s.timeouts.poll,
			RayReadyTimeout: s.timeouts.rayReady,
			Parallelism:     s.applyParallelism(),
			Diagnose:        resources.DiagnoseContext(obs.cfg, obs.facts, obs.result.Addrs, w),
			ServeNodes:      serveNodes,
			Log:             s.c.log.Named("apply"),
		}
		work[addr] = &apply.Resource{Address: addr, Action: w.Action, Steps: resources.Steps(env, w)}
		if w.Action == plan.Delete && destroyGraph == nil {
			g.Add(addr)
			if w.Type == "vllm_serve" {
				deletedServes = append(deletedServes, addr)
			} else {
				deletedClusters = append(deletedClusters, addr)
			}
		}
	}
	for _, cl := range deletedClusters {
		for _, sv := range deletedServes {
			g.Connect(cl, sv)
		}
	}
	if destroyGraph == nil {
		s.stopServesFirst(obs, g, work)
	}
	return g, work
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
		work[stop] = &apply.Resource{Address: sv.Addr, Action: plan.Replace, Steps: steps}
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

// recordState writes down where each applied resource lives, and forgets
// destroyed ones, whatever the walk's outcome for the others.
func (s *session) recordState(obs *observed, walkErr error) error {
	failed := map[string]bool{}
	var se *apply.StepError
	for _, e := range unwrapAll(walkErr) {
		if errors.As(e, &se) {
			failed[se.Address] = true
		}
	}
	changed := false
	for addr, w := range obs.result.Work {
		if failed[addr] {
			continue
		}
		if w.Action == plan.Delete {
			s.st.Remove(addr)
			changed = true
			continue
		}
		r := state.Resource{Type: w.Type, AppliedAt: time.Now().UTC().Truncate(time.Second)}
		if w.Cluster != nil {
			r.Container = w.Cluster.Name
			if len(w.Cluster.Specs) > 0 {
				r.Container = w.Cluster.Specs[0].Name
			}
		}
		if w.Serve != nil {
			r.Container = w.Serve.Spec.Container
		}
		for _, node := range w.Hosts {
			h := state.Host{Node: node}
			if n := obs.cfg.Nodes[node]; n != nil {
				h.Host, h.User, h.Port, h.Bastion = n.Host, n.User, n.Port, n.Bastion
			}
			r.Hosts = append(r.Hosts, h)
		}
		s.st.Set(addr, r)
		changed = true
	}
	if !changed {
		return nil
	}
	return s.saveState()
}

// saveState writes the state file (atomically, 0600).
func (s *session) saveState() error {
	path := s.opts.stateFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.c.dir, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return s.st.Save(path)
}

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

// reportFailure prints each failed resource's error (which carries the
// classified cause, its evidence and the fix) once.
func (s *session) reportFailure(err error) {
	c := s.c
	for _, e := range unwrapAll(err) {
		var se *apply.StepError
		if errors.As(e, &se) && errors.Is(se.Err, dag.ErrSkipped) {
			continue
		}
		if errors.Is(e, dag.ErrSkipped) {
			continue
		}
		msg := e.Error()
		if errors.As(e, &se) {
			msg = fmt.Sprintf("%s: %s failed:\n\n%s", se.Address, se.Step, se.Err.Error())
		}
		fmt.Fprintf(c.stderr, "\n╷\n│ Error: %s\n╵\n", strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n│ "))
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
