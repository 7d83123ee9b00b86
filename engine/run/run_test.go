package run_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

// svc is the Go type of the toy kind "svc": a thing that runs on node
// "n1" once applied, after the svcs it references.
type svc struct {
	config.Decl
	Name  string   `rayform:",name"`
	After []string `rayform:"after"`
}

func svcKind() config.Kind {
	return config.Kind{
		Type: "svc",
		Args: []config.Arg{{Name: "after", Type: cty.DynamicPseudoType, Ref: "svc", Decoded: cty.List(cty.String)}},
		New:  func() any { return &svc{} },
	}
}

// cfg is a configuration as the fake provider holds it.
type cfg struct{ *config.Config }

func (c cfg) Lang() *config.Config { return c.Config }

func load(t *testing.T, src string) cfg {
	t.Helper()
	c, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{Kinds: []config.Kind{svcKind()}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg{c}
}

// work is one svc's work.
type work struct {
	addr   string
	action plan.Action
}

func (w work) Address() string     { return w.addr }
func (w work) Action() plan.Action { return w.action }

// world is the fake provider: the hosts are the set of svc addresses that
// run; a create step adds one, a delete step removes it. Plans compare the
// configuration with it, as a real provider compares it with the facts.
type world struct {
	mu      sync.Mutex
	running map[string]bool
	// ran records the steps in the order they ran.
	ran []string
	// fail makes the create step of these addresses fail.
	fail map[string]bool
	// noop makes the create step of these addresses succeed without
	// starting anything (a provider bug: apply must not claim success).
	noop map[string]bool
	// starting are addresses that run but are not ready yet; awaiting
	// them makes them ready.
	starting map[string]bool
	// ahead are stops (addr → the address that waits for it).
	ahead map[string]string
	// plans counts the plans of the configuration's changes (Plan).
	plans int
	// during, when set, runs inside the step of its address (an
	// interrupt arriving mid-step).
	during map[string]func(ctx context.Context) error
	// unreached are the hosts a destroy could not observe.
	unreached []run.Unreach
}

var _ run.Provider = (*world)(nil)

func newWorld(running ...string) *world {
	w := &world{running: map[string]bool{}, fail: map[string]bool{}, noop: map[string]bool{}, starting: map[string]bool{}, ahead: map[string]string{}, during: map[string]func(context.Context) error{}}
	for _, a := range running {
		w.running[a] = true
	}
	return w
}

func (w *world) isRunning(addr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[addr]
}

func (w *world) record(step string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ran = append(w.ran, step)
}

func (w *world) steps() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ran)
}

func (w *world) ObserveSpec(run.Config, *state.State, string, bool) observe.Spec {
	return observe.Spec{Hosts: map[string]observe.HostSpec{"n1": {}}}
}

func (w *world) Evaluate(_ context.Context, c run.Config, _ *observe.Facts, _ string) (run.Config, hcl.Diagnostics) {
	return c, nil
}

func (w *world) CheckReplace(c run.Config, addr string) error {
	if !c.Lang().Graph().Has(addr) {
		return fmt.Errorf("-replace %s: no such svc", addr)
	}
	return nil
}

func (w *world) Plan(in run.PlanInput) *run.Result {
	w.mu.Lock()
	w.plans++
	w.mu.Unlock()
	res := &run.Result{Plan: &plan.Plan{}, Work: map[string]run.Work{}}
	declared := map[string]bool{}
	for name := range in.Config.Lang().Blocks("svc") {
		addr := "svc." + name
		declared[addr] = true
		action := plan.NoOp
		switch {
		case !w.isRunning(addr):
			action = plan.Create
		case in.Replace[addr]:
			action = plan.Replace
		}
		res.Plan.Changes = append(res.Plan.Changes, plan.ResourceChange{Address: addr, Action: action})
		if action != plan.NoOp {
			res.Work[addr] = work{addr, action}
		}
	}
	if in.State != nil {
		for _, addr := range in.State.Addresses() {
			if !declared[addr] && w.isRunning(addr) {
				res.Plan.Changes = append(res.Plan.Changes, plan.ResourceChange{Address: addr, Action: plan.Delete})
				res.Work[addr] = work{addr, plan.Delete}
			}
		}
	}
	res.Plan.SortChanges()
	return res
}

func (w *world) DestroyPlan(in run.PlanInput) (*run.Result, *dag.Graph) {
	res := &run.Result{Plan: &plan.Plan{}, Work: map[string]run.Work{}}
	g := dag.New()
	for name := range in.Config.Lang().Blocks("svc") {
		addr := "svc." + name
		action := plan.NoOp
		if w.isRunning(addr) {
			action = plan.Delete
		}
		res.Plan.Changes = append(res.Plan.Changes, plan.ResourceChange{Address: addr, Action: action})
		res.Work[addr] = work{addr, action}
		g.Add(addr)
	}
	// Dependents go first: the reverse of the configuration's edges.
	full := in.Config.Lang().Graph()
	for _, n := range g.Nodes() {
		for _, dep := range full.DependenciesOf(n) {
			if g.Has(dep) {
				g.Connect(dep, n)
			}
		}
	}
	res.Plan.SortChanges()
	return res, g
}

func (w *world) Starting(in run.PlanInput) []run.Work {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []run.Work
	for _, addr := range slices.Sorted(maps.Keys(w.starting)) {
		out = append(out, work{addr, plan.NoOp})
	}
	return out
}

func (w *world) Fingerprints(*observe.Facts) map[string]string { return map[string]string{} }

func (w *world) LockTargets(c run.Config, st *state.State) []run.LockTarget {
	var out []run.LockTarget
	for _, name := range slices.Sorted(maps.Keys(c.Lang().Blocks("svc"))) {
		out = append(out, run.LockTarget{Resource: "svc." + name, Key: name, Host: "n1"})
	}
	for _, addr := range st.Addresses() {
		r, _ := st.Get(addr)
		out = append(out, run.LockTarget{Resource: addr, Key: strings.TrimPrefix(addr, "svc."), Host: r.Head, FromState: true})
	}
	return out
}

func (w *world) Present(in run.PlanInput) (map[string]run.Present, map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]run.Present{}
	for addr := range w.running {
		out[addr] = run.Present{Type: "svc", Nodes: []string{"n1"}, Container: strings.ReplaceAll(addr, ".", "-"), Head: "n1"}
	}
	return out, map[string]bool{}
}

// Record names the container otherwise than Present does, so that a test
// tells which the state came from.
func (w *world) Record(rw run.Work) run.Present {
	return run.Present{Type: "svc", Nodes: []string{"n1"}, Container: "recorded-" + strings.ReplaceAll(rw.Address(), ".", "-")}
}

func (w *world) Host(_ run.Config, node string) (state.Host, bool) {
	if node != "n1" {
		return state.Host{}, false
	}
	return state.Host{Node: "n1", Host: "10.0.0.1", User: "ops"}, true
}

func (w *world) Fabric(run.Config, *observe.Facts) (map[string]netip.Addr, map[string]string) {
	return map[string]netip.Addr{"n1": netip.MustParseAddr("192.168.1.1")}, map[string]string{"n1": "eth1"}
}

func (w *world) Unreached(*observe.Facts, map[string]run.Work) []run.Unreach { return w.unreached }

func (w *world) CheckPrepare(*run.Observation, string) error { return nil }

func (w *world) PrepareSteps(_ run.Env, obs *run.Observation, addr string) []apply.Step {
	if obs.Result.Work[addr].Action() != plan.Create {
		return nil
	}
	return []apply.Step{apply.Func{Label: "pull", RunFunc: func(context.Context, func(string)) error {
		w.record("prepare " + addr)
		return nil
	}}}
}

func (w *world) Walk(_ context.Context, _ run.Env, obs *run.Observation) run.WalkSteps {
	out := run.WalkSteps{Steps: map[string][]apply.Step{}}
	for addr, wk := range obs.Result.Work {
		action := wk.Action()
		out.Steps[addr] = []apply.Step{apply.Func{Label: string(action), RunFunc: func(ctx context.Context, _ func(string)) error {
			w.record(string(action) + " " + addr)
			if f := w.during[addr]; f != nil {
				if err := f(ctx); err != nil {
					return err
				}
			}
			if w.fail[addr] {
				return errors.New("it broke")
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			switch {
			case action == plan.Delete:
				delete(w.running, addr)
			case !w.noop[addr]:
				w.running[addr] = true
			}
			return nil
		}}}
	}
	for addr, before := range w.ahead {
		if obs.Result.Work[addr] == nil || obs.Result.Work[before] == nil {
			continue
		}
		out.Ahead = append(out.Ahead, run.Ahead{Node: addr + "#stop", Before: before, Resource: &apply.Resource{Address: addr, Action: plan.Replace, Ahead: true,
			Steps: []apply.Step{apply.Func{Label: "stop", RunFunc: func(context.Context, func(string)) error {
				w.record("stop " + addr)
				return nil
			}}}}})
	}
	return out
}

func (w *world) OrderDestroy(*dag.Graph, map[string]run.Work) {}

func (w *world) AwaitSteps(_ run.Env, _ *run.Observation, rw run.Work) []apply.Step {
	addr := rw.Address()
	return []apply.Step{apply.Func{Label: "await", RunFunc: func(context.Context, func(string)) error {
		w.record("await " + addr)
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.starting, addr)
		return nil
	}}}
}

// view records what the run shows.
type view struct {
	mu          sync.Mutex
	approve     bool
	asked       bool
	events      []string
	errs        []string
	failed      []error
	interrupted bool
	complete    *plan.Counts
	changed     bool
}

var _ run.View = (*view)(nil)

func (v *view) add(e string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events = append(v.events, e)
}

func (v *view) LockWaiting(resource string, _ *lock.HeldError) { v.add("waiting " + resource) }
func (v *view) LockBroken(resource, host, _ string)            { v.add("broke " + resource) }
func (v *view) LockSkipped(resource, host string, _ error)     { v.add("skipped " + resource) }
func (v *view) OrphansEnded(host, name string, _ uint64, ended []lock.Ended) {
	v.add(fmt.Sprintf("ended %d on %s", len(ended), host))
}
func (v *view) Hooks() apply.Hooks           { return hooks{v} }
func (v *view) Plan(*run.Observation) error  { v.add("plan"); return nil }
func (v *view) Confirm(context.Context) bool { v.asked = true; return v.approve }
func (v *view) Cancelled()                   { v.add("cancelled") }
func (v *view) Interrupting()                { v.add("interrupting") }
func (v *view) Error(err error)              { v.errs = append(v.errs, err.Error()) }
func (v *view) Failed(err error, interrupted bool) {
	v.failed = append(v.failed, err)
	v.interrupted = v.interrupted || interrupted
}
func (v *view) NothingChanged()         { v.add("nothing changed") }
func (v *view) LockLost(err error)      { v.errs = append(v.errs, err.Error()) }
func (v *view) Unreached([]run.Unreach) { v.add("unreached") }
func (v *view) Complete(c plan.Counts, _ *run.Observation, changed bool) {
	v.complete, v.changed = &c, changed
}

type hooks struct{ v *view }

func (h hooks) ResourceStart(addr string, a plan.Action)                  { h.v.add("start " + addr) }
func (h hooks) StepStart(addr, step string)                               {}
func (h hooks) StepSkipped(addr, step string)                             {}
func (h hooks) Progress(addr, msg string)                                 {}
func (h hooks) ResourceComplete(string, plan.Action, time.Duration)       {}
func (h hooks) ResourceErrored(string, plan.Action, time.Duration, error) {}

const twoSvcs = `
svc "a" {}
svc "b" {
  after = [svc.a]
}
`

// runner returns a Runner over w, with a state in a temporary directory
// and a local connection for n1 (observe runs its read-only probe there).
func runner(t *testing.T, w *world, src string, opts run.Options) *run.Runner {
	t.Helper()
	st, err := state.New("p")
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLock = true
	return &run.Runner{
		Provider:  w,
		Config:    load(t, src),
		State:     st,
		StatePath: filepath.Join(t.TempDir(), "state.json"),
		Project:   "p",
		Conns:     map[string]transport.Conn{"n1": local.New(local.Options{Host: "n1"})},
		Options:   opts,
	}
}

func TestApplyWalksInOrderAndRecordsWhatRuns(t *testing.T) {
	w := newWorld()
	r := runner(t, w, twoSvcs, run.Options{})
	v := &view{approve: true}
	if err := r.Apply(context.Background(), run.ApplyRequest{}, v); err != nil {
		t.Fatalf("apply: %v (errors %v, failed %v)", err, v.errs, v.failed)
	}
	// Both prepared (in parallel) before the first change, then created
	// in the graph's order.
	got := w.steps()
	want := []string{"prepare svc.a", "prepare svc.b", "create svc.a", "create svc.b"}
	if len(got) != 4 || !slices.Equal(slices.Sorted(slices.Values(got[:2])), want[:2]) || !slices.Equal(got[2:], want[2:]) {
		t.Errorf("steps %v, want %v (the prepares in any order)", got, want)
	}
	if !v.asked || v.complete == nil || v.complete.Add != 2 || !v.changed {
		t.Errorf("asked %v, complete %+v (changed %v), want asked and 2 added", v.asked, v.complete, v.changed)
	}
	// The state is saved and records what the hosts show, with the
	// node's coordinates and its fabric address.
	saved, err := state.Load(r.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	if got := saved.Addresses(); !slices.Equal(got, []string{"svc.a", "svc.b"}) {
		t.Fatalf("state records %v", got)
	}
	rec, _ := saved.Get("svc.b")
	if rec.Container != "svc-b" || rec.Head != "n1" || len(rec.Hosts) != 1 || rec.Hosts[0].Host != "10.0.0.1" || rec.Hosts[0].FabricAddress != "192.168.1.1" || rec.AppliedAt.IsZero() {
		t.Errorf("svc.b recorded as %+v", rec)
	}

	// Again: nothing to do, no question asked, no step run.
	v2 := &view{}
	if err := r.Apply(context.Background(), run.ApplyRequest{}, v2); err != nil {
		t.Fatalf("second apply: %v (errors %v)", err, v2.errs)
	}
	if v2.asked || v2.complete == nil || v2.changed || *v2.complete != (plan.Counts{}) || len(w.steps()) != len(want) {
		t.Errorf("no-op apply: asked %v, complete %+v changed %v, steps %v", v2.asked, v2.complete, v2.changed, w.steps())
	}
}

func TestApplyStopsWhereAStepFails(t *testing.T) {
	w := newWorld()
	w.fail["svc.a"] = true
	r := runner(t, w, twoSvcs, run.Options{})
	v := &view{approve: true}
	err := r.Apply(context.Background(), run.ApplyRequest{}, v)
	if !errors.Is(err, run.ErrFailed) {
		t.Fatalf("apply: %v, want ErrFailed", err)
	}
	var se *apply.StepError
	if len(v.failed) != 1 || !errors.As(v.failed[0], &se) || se.Address != "svc.a" {
		t.Fatalf("failures %v, want svc.a's step", v.failed)
	}
	if slices.Contains(w.steps(), "create svc.b") {
		t.Errorf("svc.b was created after svc.a, which it depends on, failed: %v", w.steps())
	}
	if v.complete != nil {
		t.Error("a failed apply reported completion")
	}
}

func TestApplyRefusesToClaimConvergence(t *testing.T) {
	w := newWorld()
	w.noop["svc.b"] = true
	r := runner(t, w, twoSvcs, run.Options{})
	v := &view{approve: true}
	if err := r.Apply(context.Background(), run.ApplyRequest{}, v); err == nil {
		t.Fatal("apply succeeded although svc.b never started")
	}
	if len(v.errs) != 1 || !strings.Contains(v.errs[0], "apply did not converge") || !strings.Contains(v.errs[0], "svc.b (create") {
		t.Errorf("errors %q, want apply did not converge naming svc.b", v.errs)
	}
	// The state records what runs: svc.a, not svc.b.
	saved, _ := state.Load(r.StatePath)
	if got := saved.Addresses(); !slices.Equal(got, []string{"svc.a"}) {
		t.Errorf("state records %v, want [svc.a]", got)
	}
}

func TestApplyCancelledChangesNothing(t *testing.T) {
	w := newWorld()
	r := runner(t, w, twoSvcs, run.Options{})
	v := &view{approve: false}
	if err := r.Apply(context.Background(), run.ApplyRequest{}, v); err == nil {
		t.Fatal("a refused apply succeeded")
	}
	if !slices.Contains(v.events, "cancelled") || len(w.steps()) != 0 {
		t.Errorf("events %v, steps %v: want cancelled and no step", v.events, w.steps())
	}
}

func TestApplyRunsAheadPartsFirst(t *testing.T) {
	// svc.b is replaced; its stop must run before svc.a changes.
	w := newWorld("svc.b")
	w.ahead["svc.b"] = "svc.a"
	// One at a time: without the edge, svc.a (first by name) would go first.
	r := runner(t, w, twoSvcs, run.Options{Replace: []string{"svc.b"}, Parallelism: 1})
	v := &view{approve: true}
	if err := r.Apply(context.Background(), run.ApplyRequest{}, v); err != nil {
		t.Fatalf("apply: %v (errors %v, failed %v)", err, v.errs, v.failed)
	}
	got := w.steps()
	stop, create := slices.Index(got, "stop svc.b"), slices.Index(got, "create svc.a")
	if stop < 0 || create < 0 || stop > create {
		t.Errorf("steps %v: want svc.b's stop before svc.a's create", got)
	}
	if slices.Index(got, "replace svc.b") < create {
		t.Errorf("steps %v: svc.b replaced before svc.a, which it depends on", got)
	}
}

func TestApplyWaitsForStartingOnNoOp(t *testing.T) {
	w := newWorld("svc.a", "svc.b")
	w.starting["svc.b"] = true
	r := runner(t, w, twoSvcs, run.Options{})
	v := &view{}
	if err := r.Apply(context.Background(), run.ApplyRequest{}, v); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got := w.steps(); !slices.Equal(got, []string{"await svc.b"}) {
		t.Errorf("steps %v, want [await svc.b]", got)
	}
}

func TestDestroyTargetTakesItsDependents(t *testing.T) {
	for _, tc := range []struct {
		targets []string
		want    []string // the steps, in order
	}{
		{nil, []string{"delete svc.b", "delete svc.a"}},
		{[]string{"svc.a"}, []string{"delete svc.b", "delete svc.a"}},
		{[]string{"svc.b"}, []string{"delete svc.b"}},
	} {
		t.Run(strings.Join(tc.targets, ","), func(t *testing.T) {
			w := newWorld("svc.a", "svc.b")
			r := runner(t, w, twoSvcs, run.Options{Targets: tc.targets})
			v := &view{approve: true}
			if err := r.Apply(context.Background(), run.ApplyRequest{Destroy: true, AutoApprove: true}, v); err != nil {
				t.Fatalf("destroy: %v (errors %v, failed %v)", err, v.errs, v.failed)
			}
			if v.asked {
				t.Error("asked despite AutoApprove")
			}
			if got := w.steps(); !slices.Equal(got, tc.want) {
				t.Errorf("steps %v, want %v", got, tc.want)
			}
			if v.complete == nil || v.complete.Destroy != len(tc.want) {
				t.Errorf("complete %+v, want %d destroyed", v.complete, len(tc.want))
			}
		})
	}
}

// TestDestroyPlansNoChanges: destroy (apply's, and the plan of one)
// plans the removals only, never the configuration's changes, whose
// lookups may reach outside the hosts (a model's hub): the provider's
// Plan is not called; an unknown target is still refused.
func TestDestroyPlansNoChanges(t *testing.T) {
	w := newWorld("svc.a", "svc.b")
	r := runner(t, w, twoSvcs, run.Options{})
	v := &view{approve: true}
	if err := r.Apply(context.Background(), run.ApplyRequest{Destroy: true, AutoApprove: true}, v); err != nil {
		t.Fatalf("destroy: %v (errors %v, failed %v)", err, v.errs, v.failed)
	}
	if got := w.steps(); !slices.Equal(got, []string{"delete svc.b", "delete svc.a"}) {
		t.Errorf("steps %v", got)
	}
	obs, g, err := r.ObserveDestroy(context.Background())
	if err != nil || g == nil || obs.Result == nil {
		t.Fatalf("plan -destroy: %v", err)
	}
	if w.plans != 0 {
		t.Errorf("destroy planned the configuration's changes %d times", w.plans)
	}
	r.Options.Targets = []string{"svc.nope"}
	if _, _, err := r.ObserveDestroy(context.Background()); err == nil || !strings.Contains(err.Error(), "-target svc.nope: no such resource") {
		t.Errorf("unknown target: %v", err)
	}
}

func TestObserveNarrowsToTargets(t *testing.T) {
	w := newWorld()
	r := runner(t, w, twoSvcs, run.Options{Targets: []string{"svc.a"}})
	obs, err := r.Observe(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(obs.Result.Work)); !slices.Equal(got, []string{"svc.a"}) {
		t.Errorf("work %v, want [svc.a]: svc.b depends on the target, not the reverse", got)
	}
	if obs.Facts.Hosts["n1"] == nil {
		t.Error("n1 was not observed")
	}
	r.Options.Targets = []string{"svc.nope"}
	if _, err := r.Observe(context.Background(), false); err == nil || !strings.Contains(err.Error(), "-target svc.nope: no such resource") {
		t.Errorf("unknown target: %v", err)
	}
}

func TestLockNamesDeduplicatedAndSorted(t *testing.T) {
	w := newWorld()
	r := runner(t, w, twoSvcs, run.Options{})
	r.State.Set("svc.b", state.Resource{Type: "svc", Head: "n1"}) // the same lock as the configuration's
	r.State.Set("svc.old", state.Resource{Type: "svc", Head: "n0"})
	want := []string{lock.Name("p", "a") + "@n1", lock.Name("p", "b") + "@n1", lock.Name("p", "old") + "@n0"}
	slices.Sort(want)
	if got := r.LockNames(); !slices.Equal(got, want) {
		t.Errorf("locks %v, want %v", got, want)
	}
}

// TestInterruptedApplyRecordsWhatCompleted: the second interrupt cancels
// the run's context mid-walk; the hosts are not observed again, so the
// state records exactly the resources the walk completed (from the
// provider's Record), not the one cut short.
func TestInterruptedApplyRecordsWhatCompleted(t *testing.T) {
	w := newWorld()
	r := runner(t, w, twoSvcs, run.Options{})
	ctx, second := context.WithCancel(context.Background())
	defer second()
	var handler func()
	req := run.ApplyRequest{AutoApprove: true, OnInterrupt: func(f func()) {
		if f != nil {
			handler = f
		}
	}}
	w.during["svc.b"] = func(stepCtx context.Context) error {
		handler() // the first Ctrl-C: no new step starts
		second()  // the second: what runs is cancelled
		<-stepCtx.Done()
		return stepCtx.Err()
	}
	v := &view{}
	if err := r.Apply(ctx, req, v); !errors.Is(err, run.ErrFailed) {
		t.Fatalf("apply: %v, want ErrFailed", err)
	}
	if !v.interrupted || !slices.Contains(v.events, "interrupting") {
		t.Errorf("interrupted %v, events %v: want the interrupt reported", v.interrupted, v.events)
	}
	saved, err := state.Load(r.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	if got := saved.Addresses(); !slices.Equal(got, []string{"svc.a"}) {
		t.Fatalf("state records %v, want [svc.a], the one the walk completed", got)
	}
	rec, _ := saved.Get("svc.a")
	if rec.Container != "recorded-svc-a" || len(rec.Hosts) != 1 || rec.Hosts[0].Host != "10.0.0.1" {
		t.Errorf("svc.a recorded as %+v, want the provider's record of the completed work, on n1", rec)
	}
}

// TestDestroyFailsOnUnreachedHosts: a destroy that could not observe a
// host of a resource fails, telling which, even though what it could
// reach was destroyed.
func TestDestroyFailsOnUnreachedHosts(t *testing.T) {
	w := newWorld("svc.a")
	w.unreached = []run.Unreach{{Address: "svc.a", Node: "n2", Why: "connection refused"}}
	r := runner(t, w, `svc "a" {}`, run.Options{})
	v := &view{}
	if err := r.Apply(context.Background(), run.ApplyRequest{Destroy: true, AutoApprove: true}, v); !errors.Is(err, run.ErrFailed) {
		t.Fatalf("destroy: %v, want ErrFailed", err)
	}
	if !slices.Contains(v.events, "unreached") || v.complete != nil {
		t.Errorf("events %v, complete %+v: want unreached and no completion", v.events, v.complete)
	}
	if got := w.steps(); !slices.Equal(got, []string{"delete svc.a"}) {
		t.Errorf("steps %v, want [delete svc.a]", got)
	}
}
