// Package run is the run of plan, apply and destroy: lock, observe, plan,
// confirm, walk, re-observe, record the state. It is to rayform what
// Terraform's backend/local is to its thin command/ and views/: the
// command line parses flags, builds a [Runner] and renders what it reports
// through a [View].
//
// The package knows no resource kind. What blocks mean (what to ask the
// hosts, how to plan, the steps, what is present, which locks to take)
// comes from a [Provider] the caller supplies; everything a person sees
// goes through the caller's [View].
package run

import (
	"context"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
)

// Config is a configuration as the provider holds it: the language's
// values (files, variables, the graph) and the provider's view of its
// blocks, which only the provider reads.
type Config interface {
	// Lang is the configuration as the language evaluated it.
	Lang() *config.Config
}

// Work is what apply must do for one resource, as the provider planned
// it; the engine reads only its action and hands it back to the provider.
type Work interface {
	Address() string
	Action() plan.Action
}

// Result is a plan and the work that carries it out.
type Result struct {
	Plan *plan.Plan
	// Work is keyed by resource address; resources with nothing to do are
	// absent.
	Work map[string]Work
	// Notes say what the plan could not check, and why; they are not
	// findings.
	Notes []string
	// Data is the provider's own (what its steps need besides the work);
	// the engine hands it back untouched.
	Data any
}

// PlanInput is what a plan is computed from.
type PlanInput struct {
	// Config is evaluated with the observed facts (Provider.Evaluate).
	Config  Config
	Facts   *observe.Facts
	State   *state.State
	Project string
	// RefreshOnly reports drift and plans no action.
	RefreshOnly bool
	// Replace holds the addresses to replace even where they match.
	Replace map[string]bool
}

// Present is what the observed hosts show of one resource.
type Present struct {
	Type string
	// Nodes are the nodes holding it, sorted.
	Nodes []string
	// Container is the name of its container, as the state records it.
	Container string
	// Head is the node the resource's lock lives on ("" if none).
	Head string
}

// Unreach is one host of a destroyed resource that could not be observed.
type Unreach struct {
	Address, Node string
	// Why is the observation's error.
	Why string
}

// LockTarget is one lock a run takes: a resource's lock on one host.
type LockTarget struct {
	// Resource is the locked resource's address, for messages.
	Resource string
	// Key is the resource's name within the project: the lock is
	// lock.Name(project, Key).
	Key string
	// Host is the node the lock lives on.
	Host string
	// FromState is set when only the state names this host (not the
	// configuration): a host that cannot be locked there is fenced off
	// instead of failing the run.
	FromState bool
}

// Ahead is a part of a resource's work that runs ahead of the graph's
// order (a serve stopped before the cluster under it changes): a node of
// its own, on which Before depends.
type Ahead struct {
	// Node is the graph node's name ("ADDRESS#stop").
	Node     string
	Resource *apply.Resource
	// Before is the address that waits for it.
	Before string
}

// WalkSteps is what the provider gives the walk.
type WalkSteps struct {
	// Steps are each resource's steps, by address.
	Steps map[string][]apply.Step
	// Ahead run before the resources they name (not on destroy).
	Ahead []Ahead
	// After are, by address, the nodes each resource's work waits for
	// beyond the configuration's order (not on destroy): the provider's
	// ordering of resources the configuration leaves unordered.
	After map[string][]string
	// Done, when set, is called once the walk ended.
	Done func()
}

// Env is what the provider's steps get from the run.
type Env struct {
	// Conns are the run's connections by node name, guarded by its locks.
	Conns   map[string]transport.Conn
	Project string
	// Parallelism bounds the hosts worked on at once within a step.
	Parallelism int
	// State is the run's state (the images' answers to checks).
	State *state.State
	Log   hclog.Logger
	// NotAtomic: see Options.NotAtomic.
	NotAtomic bool
}

// Provider is what the engine asks about what blocks mean. Everything
// kind-specific of a run goes through it.
type Provider interface {
	// ObserveSpec says what to ask each host; status adds the probes
	// only status shows.
	ObserveSpec(cfg Config, st *state.State, project string, status bool) observe.Spec
	// Evaluate re-evaluates cfg with what the hosts showed (and asks
	// what else the plan needs, such as a model's files on its hub).
	Evaluate(ctx context.Context, cfg Config, facts *observe.Facts, project string) (Config, hcl.Diagnostics)
	// CheckReplace refuses a -replace address that cannot be replaced.
	CheckReplace(cfg Config, addr string) error
	// Plan computes the plan (no I/O).
	Plan(in PlanInput) *Result
	// DestroyPlan plans the destruction of every resource, and the order
	// of its walk.
	DestroyPlan(in PlanInput) (*Result, *dag.Graph)
	// Starting lists the work of waiting for the resources of in that run
	// but are not ready yet (AwaitSteps); apply succeeds only once they
	// are.
	Starting(in PlanInput) []Work
	// Fingerprints are the hosts' fingerprints a saved plan commits to.
	Fingerprints(facts *observe.Facts) map[string]string
	// LockTargets lists the locks a run takes, the configuration's first:
	// of two targets of one lock and host, the first is kept.
	LockTargets(cfg Config, st *state.State) []LockTarget
	// Present reads which resources the hosts show; unknown are the
	// nodes whose holdings could not be read.
	Present(in PlanInput) (present map[string]Present, unknown map[string]bool)
	// Record is the state record of w once completed, when the hosts
	// could not be observed again: its nodes in Nodes.
	Record(w Work) Present
	// Host is the SSH coordinates of node in cfg (false when cfg has no
	// such node).
	Host(cfg Config, node string) (state.Host, bool)
	// Fabric is each node's observed fabric address and interface.
	Fabric(cfg Config, facts *observe.Facts) (map[string]netip.Addr, map[string]string)
	// Unreached lists the hosts of work that facts could not observe.
	Unreached(facts *observe.Facts, work map[string]Work) []Unreach
	// CheckPrepare checks, before anything runs, what can be checked
	// without the hosts (command lines within their limits).
	CheckPrepare(obs *Observation, project string) error
	// PrepareSteps are the read-only steps proving that what addr starts
	// can start.
	PrepareSteps(env Env, obs *Observation, addr string) []apply.Step
	// Walk gives the steps of every resource of obs's work; ctx bounds
	// what they start ahead.
	Walk(ctx context.Context, env Env, obs *Observation) WalkSteps
	// OrderDestroy adds to g the order in which work's resources go.
	OrderDestroy(g *dag.Graph, work map[string]Work)
	// AwaitSteps wait for w (from Starting) to be ready.
	AwaitSteps(env Env, obs *Observation, w Work) []apply.Step
}

// Observation is one observation of the hosts and the plan made from it.
type Observation struct {
	Facts *observe.Facts
	// Config is evaluated with the facts.
	Config  Config
	Result  *Result
	Elapsed time.Duration
}

// Options are the choices of one run.
type Options struct {
	// Parallelism bounds the hosts observed and the resources applied at
	// once (0: every host when observing, 10 when applying).
	Parallelism int
	// Targets narrow the run to these addresses and what they depend on
	// (destroy: what depends on them).
	Targets []string
	// Replace are resources to replace even where they match.
	Replace []string
	// NoLock skips the state and cluster locks.
	NoLock bool
	// LockTimeout is how long to wait for a held lock.
	LockTimeout time.Duration
	// RotateToken makes each deployment's bearer token anew under its lock
	// (lock.AdvanceFence), before observing: the services that demand the
	// old one are then planned for replacement.
	RotateToken bool
	// StatusProbes adds status's probes to the observation.
	StatusProbes bool
	// NotAtomic keeps a failed replacement as it failed (apply
	// -atomic=false) instead of putting back what ran before it.
	NotAtomic bool
}

// Runner is one run's configuration, state and connections.
type Runner struct {
	Provider Provider
	// Config is the configuration as loaded, before observed facts.
	Config Config
	State  *state.State
	// StatePath is where the state is saved.
	StatePath string
	Project   string
	// Conns are the connections by node name; apply guards them with its
	// locks in place.
	Conns   map[string]transport.Conn
	Options Options
	Log     hclog.Logger
	// Dir is the configuration directory (saved plans record the files
	// relative to it); Version is rayform's (saved plans and -json).
	Dir, Version string
	// Diagnostics shows configuration problems that only the observed
	// facts reveal; nil drops them.
	Diagnostics func(cfg Config, diags hcl.Diagnostics)
}

// ApplyParallelism is how many resources (and hosts within a step) apply
// works on at once.
func (r *Runner) ApplyParallelism() int {
	if r.Options.Parallelism > 0 {
		return r.Options.Parallelism
	}
	return 10
}

func (r *Runner) log() hclog.Logger {
	if r.Log == nil {
		return hclog.NewNullLogger()
	}
	return r.Log
}

// planInput is the input of a plan of obs.
func (r *Runner) planInput(cfg Config, facts *observe.Facts) PlanInput {
	return PlanInput{Config: cfg, Facts: facts, State: r.State, Project: r.Project}
}
