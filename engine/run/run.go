// Package run is the run of plan, apply and destroy: lock, observe, plan,
// confirm, walk, re-observe, record the state. It is to rayform what
// Terraform's backend/local is to its thin command/ and views/: the
// command line parses flags, builds a [Runner] and renders what it reports
// through a [View].
//
// The package knows no resource kind by name: it drives the kinds of the
// Runner's registry (kind.Registry, which the caller hands in) through
// the contract of engine/kind alone. What blocks mean (what to ask the
// hosts, how to plan, the steps, what is present, which locks to take)
// the kinds answer; the run asks every kind that implements the optional
// interface of it, in registration order (plan.go, destroy.go,
// observespec.go, present.go, walk.go, status.go, logs.go). Everything a
// person sees goes through the caller's [View].
package run

import (
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
)

// Result is a plan and the work that carries it out.
type Result struct {
	Plan *plan.Plan
	// Work is keyed by resource address; resources with nothing to do are
	// absent.
	Work map[string]*kind.Work
	// Fabric are the nodes' observed fabric addresses the plan read.
	Fabric map[string]netip.Addr
	// Notes say what the plan could not check, and why; they are not
	// findings.
	Notes []string
}

// PlanInput is what a plan is computed from. Planning does no I/O.
type PlanInput struct {
	// Config is evaluated with the observed facts (Evaluate).
	Config  *config.Config
	Facts   *observe.Facts
	State   *state.State // nil means empty
	Project string
	// RefreshOnly reports drift and plans no action.
	RefreshOnly bool
	// Replace holds the addresses to replace even where they match
	// (apply -replace=ADDRESS).
	Replace map[string]bool
}

// Present is what the observed hosts show of one resource of the project.
type Present struct {
	Type string
	// Nodes are the nodes holding it, sorted.
	Nodes []string
	// Container is the name of its container, as the state records it.
	Container string
	// Head is the node the resource's lock lives on ("" if none).
	Head string
}

// LockTarget is one lock a run takes: a resource's lock on one host
// (kind.Lock; the lock is lock.Name(project, Key)).
type LockTarget = kind.Lock

// Observation is one observation of the hosts and the plan made from it.
type Observation struct {
	Facts *observe.Facts
	// Config is evaluated with the facts.
	Config  *config.Config
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

// Runner is one run's kinds, configuration, state and connections.
type Runner struct {
	// Kinds are the resource kinds the run drives (resources.Kinds).
	Kinds kind.Registry
	// Config is the configuration as loaded, before observed facts.
	Config *config.Config
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
	Diagnostics func(cfg *config.Config, diags hcl.Diagnostics)
	// Poll and ReadyTimeout are the steps' (kind.Env); zero: the kinds'
	// defaults.
	Poll, ReadyTimeout time.Duration
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

// planInput is the input of a plan of cfg evaluated with facts.
func (r *Runner) planInput(cfg *config.Config, facts *observe.Facts) PlanInput {
	return PlanInput{Config: cfg, Facts: facts, State: r.State, Project: r.Project}
}
