package run_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/lock"
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

func load(t *testing.T, src string) *config.Config {
	t.Helper()
	c, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{Kinds: []config.Kind{svcKind()}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return c
}

// svcWork is one svc's own part of its work: the container the state
// records when the hosts could not be observed again, named otherwise
// than Present names it, so that a test tells which the state came from.
type svcWork struct{ addr string }

func (w svcWork) Container() string { return "recorded-" + strings.ReplaceAll(w.addr, ".", "-") }

// world is the fake hosts the kinds of the test (hostsKind, svcs) see: the
// set of svc addresses that run; a create step adds one, a delete step
// removes it. Plans compare the configuration with it, as a real kind
// compares it with the facts.
type world struct {
	mu      sync.Mutex
	running map[string]bool
	// ran records the steps in the order they ran.
	ran []string
	// fail makes the create step of these addresses fail.
	fail map[string]bool
	// noop makes the create step of these addresses succeed without
	// starting anything (a kind's bug: apply must not claim success).
	noop map[string]bool
	// starting are addresses that run but are not ready yet; awaiting
	// them makes them ready.
	starting map[string]bool
	// early are stops (addr → the address that waits for it).
	early map[string]string
	// plans counts the plans of the configuration's changes (Plan).
	plans int
	// during, when set, runs inside the step of its address (an
	// interrupt arriving mid-step).
	during map[string]func(ctx context.Context) error
	// elsewhere are nodes besides n1 a svc runs on, which the run does
	// not observe.
	elsewhere map[string][]string
}

func newWorld(running ...string) *world {
	w := &world{running: map[string]bool{}, fail: map[string]bool{}, noop: map[string]bool{}, starting: map[string]bool{},
		early: map[string]string{}, during: map[string]func(context.Context) error{}, elsewhere: map[string][]string{}}
	for _, a := range running {
		w.running[a] = true
	}
	return w
}

// kinds is the registry of the test: the hosts, then the svcs.
func (w *world) kinds() kind.Registry { return kind.Registry{hostsKind{}, svcs{w}} }

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

// hostsKind is the kind of the one host, n1, on its fabric.
type hostsKind struct{}

var (
	_ kind.KindWithHosts  = hostsKind{}
	_ kind.KindWithFabric = hostsKind{}
)

func (hostsKind) Schema() config.Kind { return config.Kind{Type: "host"} }
func (hostsKind) Traits() kind.Traits { return kind.Traits{} }
func (hostsKind) Plan(kind.Planner)   {}
func (hostsKind) Hosts(*config.Config) []kind.Host {
	return []kind.Host{{Name: "n1", Host: "10.0.0.1", User: "ops"}}
}
func (hostsKind) Fabric(kind.FabricRequest) kind.Fabric {
	return kind.Fabric{Addrs: map[string]netip.Addr{"n1": netip.MustParseAddr("192.168.1.1")}, Ifaces: map[string]string{"n1": "eth1"}}
}

// svcs is the svc kind over the world.
type svcs struct{ w *world }

var (
	_ kind.KindWithDestroy    = svcs{}
	_ kind.KindWithPresence   = svcs{}
	_ kind.KindWithSteps      = svcs{}
	_ kind.KindWithPrepare    = svcs{}
	_ kind.KindWithEarlySteps = svcs{}
	_ kind.KindWithAwait      = svcs{}
	_ kind.KindWithLocks      = svcs{}
)

func (svcs) Schema() config.Kind { return svcKind() }
func (svcs) Traits() kind.Traits { return kind.Traits{Replaceable: true} }

func (k svcs) work(addr string, action plan.Action) *kind.Work {
	return &kind.Work{Address: addr, Type: "svc", Action: action, Hosts: append([]string{"n1"}, k.w.elsewhere[addr]...), Do: svcWork{addr}}
}

func (k svcs) Plan(p kind.Planner) {
	k.w.mu.Lock()
	k.w.plans++
	k.w.mu.Unlock()
	for name := range p.Config().Blocks("svc") {
		addr := "svc." + name
		action := plan.NoOp
		switch {
		case !k.w.isRunning(addr):
			action = plan.Create
		case p.Replace(addr):
			action = plan.Replace
		}
		p.Change(plan.ResourceChange{Address: addr, Action: action})
		if action != plan.NoOp {
			p.AddWork(k.work(addr, action))
		}
	}
}

// Destroy removes every doomed svc (apply: those that run), dependents
// first: the reverse of the configuration's edges.
func (k svcs) Destroy(d kind.Destroyer) {
	for _, addr := range d.Doomed("svc") {
		running := k.w.isRunning(addr)
		if running || d.Adopt() {
			d.Add(k.work(addr, plan.Delete), strings.TrimPrefix(addr, "svc."), running)
		}
	}
	if d.Config() == nil {
		return
	}
	g := d.Config().Graph()
	for addr := range d.Works() {
		for _, dep := range g.DependenciesOf(addr) {
			d.Before(addr, dep)
		}
	}
}

func (k svcs) Present(pr *kind.Presence) {
	k.w.mu.Lock()
	defer k.w.mu.Unlock()
	for addr := range k.w.running {
		pr.Add(addr, "svc", "n1", strings.ReplaceAll(addr, ".", "-"))
		pr.Head(addr, "n1")
	}
}

func (k svcs) PrepareSteps(req kind.StepsRequest) []apply.Step {
	addr := req.Work.Address
	if req.Work.Action != plan.Create {
		return nil
	}
	return []apply.Step{apply.Func{Label: "pull", RunFunc: func(context.Context, func(string)) error {
		k.w.record("prepare " + addr)
		return nil
	}}}
}

func (k svcs) Steps(req kind.StepsRequest) []apply.Step {
	w, addr, action := k.w, req.Work.Address, req.Work.Action
	return []apply.Step{apply.Func{Label: string(action), RunFunc: func(ctx context.Context, _ func(string)) error {
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

func (k svcs) EarlySteps(req kind.EarlyStepsRequest) []kind.EarlySteps {
	var out []kind.EarlySteps
	for addr, before := range k.w.early {
		if req.Work[addr] == nil || req.Work[before] == nil {
			continue
		}
		out = append(out, kind.EarlySteps{Node: addr + "#stop", Before: before, Address: addr, Action: plan.Replace,
			Steps: []apply.Step{apply.Func{Label: "stop", RunFunc: func(context.Context, func(string)) error {
				k.w.record("stop " + addr)
				return nil
			}}}})
	}
	return out
}

func (k svcs) Starting(kind.StartingRequest) []*kind.Work {
	k.w.mu.Lock()
	defer k.w.mu.Unlock()
	var out []*kind.Work
	for _, addr := range slices.Sorted(maps.Keys(k.w.starting)) {
		out = append(out, &kind.Work{Address: addr, Type: "svc", Action: plan.NoOp, Do: svcWork{addr}})
	}
	return out
}

func (k svcs) AwaitSteps(req kind.StepsRequest) []apply.Step {
	addr := req.Work.Address
	return []apply.Step{apply.Func{Label: "await", RunFunc: func(context.Context, func(string)) error {
		k.w.record("await " + addr)
		k.w.mu.Lock()
		defer k.w.mu.Unlock()
		delete(k.w.starting, addr)
		return nil
	}}}
}

func (svcs) Locks(req kind.LocksRequest) []kind.Lock {
	var out []kind.Lock
	for _, name := range slices.Sorted(maps.Keys(req.Config.Blocks("svc"))) {
		out = append(out, kind.Lock{Resource: "svc." + name, Key: name, Host: "n1"})
	}
	for _, addr := range req.State.Addresses() {
		r, _ := req.State.Get(addr)
		out = append(out, kind.Lock{Resource: addr, Key: strings.TrimPrefix(addr, "svc."), Host: r.Head, FromState: true})
	}
	return out
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
// and a local connection for n1 (observe runs its read-only probe there,
// with a docker that lists no container: the world is w, not the
// machine's containers).
func runner(t *testing.T, w *world, src string, opts run.Options) *run.Runner {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	st, err := state.New("p")
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLock = true
	return &run.Runner{
		Kinds:     w.kinds(),
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
	w.early["svc.b"] = "svc.a"
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
				t.Fatalf("destroy: %v (errors %v, failed %v, events %v)", err, v.errs, v.failed, v.events)
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
// lookups may reach outside the hosts (a model's hub): no kind's
// Plan is called; an unknown target is still refused.
func TestDestroyPlansNoChanges(t *testing.T) {
	w := newWorld("svc.a", "svc.b")
	r := runner(t, w, twoSvcs, run.Options{})
	v := &view{approve: true}
	if err := r.Apply(context.Background(), run.ApplyRequest{Destroy: true, AutoApprove: true}, v); err != nil {
		t.Fatalf("destroy: %v (errors %v, failed %v, events %v)", err, v.errs, v.failed, v.events)
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
// kinds' work: its container), not the one cut short.
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
		t.Errorf("svc.a recorded as %+v, want the record of the completed work, on n1", rec)
	}
}

// TestDestroyFailsOnUnreachedHosts: a destroy that could not observe a
// host of a resource fails, telling which, even though what it could
// reach was destroyed.
func TestDestroyFailsOnUnreachedHosts(t *testing.T) {
	w := newWorld("svc.a")
	w.elsewhere["svc.a"] = []string{"n2"} // never observed
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
