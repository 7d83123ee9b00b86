package kindstest

import (
	"net/netip"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
	"github.com/rayform/rayform/resources/resourcestest"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/stepenv"
)

// The tests' names for what they drive: the registered kinds through
// engine/run, and a configuration as the kinds see it.

// The block types of the kinds the tests name.
const (
	KindNode    = node.Type
	KindNetwork = network.Type
	KindCluster = cluster.Type
	KindServe   = serve.Type
)

// Kinds are the registered kinds (resources.Kinds).
func Kinds() kind.Registry { return resources.Kinds() }

// KindOf and KindAt find a registered kind by block type and address.
func KindOf(typ string) kind.Kind  { return Kinds().Of(typ) }
func KindAt(addr string) kind.Kind { return Kinds().At(addr) }

// Schemas are the registered kinds' schemas.
func Schemas() []config.Kind { return Kinds().Schemas() }

// Work is one resource's work; Facts what the hosts teach the
// configuration.
type (
	Work  = kind.Work
	Facts = kind.Facts
	// Node and Network are the node and network kinds' blocks.
	Node    = node.Node
	Network = network.Network
)

// Blocks is an evaluated configuration seen through the kinds
// (resourcestest.Blocks).
type Blocks = resourcestest.Blocks

// View, Load and LoadFiles are resourcestest's.
var (
	View      = resourcestest.View
	Load      = resourcestest.Load
	LoadFiles = resourcestest.LoadFiles
)

// PlanInput is what a plan is computed from, with the configuration seen
// through the kinds.
type PlanInput struct {
	Config      *Blocks
	Facts       *observe.Facts
	State       *state.State
	Project     string
	RefreshOnly bool
	Replace     map[string]bool
}

func (in PlanInput) run() run.PlanInput {
	var cfg *config.Config
	if in.Config != nil {
		cfg = in.Config.Config
	}
	return run.PlanInput{Config: cfg, Facts: in.Facts, State: in.State, Project: in.Project, RefreshOnly: in.RefreshOnly, Replace: in.Replace}
}

// Result is a plan and its work, with the fabric addresses it read.
type Result struct {
	Plan  *plan.Plan
	Work  map[string]*Work
	Addrs map[string]netip.Addr
	Notes []string
}

func resultOf(r *run.Result) *Result {
	return &Result{Plan: r.Plan, Work: r.Work, Addrs: r.Fabric, Notes: r.Notes}
}

// Plan is run.Plan with the registered kinds.
func Plan(in PlanInput) *Result { return resultOf(run.Plan(Kinds(), in.run())) }

// DestroyWork is run.DestroyPlanOf with the registered kinds.
func DestroyWork(in PlanInput) (*Result, *dag.Graph) {
	res, g := run.DestroyPlanOf(Kinds(), in.run())
	return resultOf(res), g
}

// ObserveSpec is run.ObserveSpec with the registered kinds, for plan.
func ObserveSpec(cfg *Blocks, st *state.State, project string) observe.Spec {
	return run.ObserveSpec(Kinds(), cfg.Config, st, project, false)
}

// Present is what the hosts show of one resource.
type Present = run.Present

// PresentResources is run.PresentResources with the registered kinds.
func PresentResources(in PlanInput) (map[string]Present, map[string]bool) {
	return run.PresentResources(Kinds(), in.run())
}

// Status is run.Status with the registered kinds.
func Status(project string, cfg *Blocks, facts *observe.Facts, res *Result) *run.StatusReport {
	return run.Status(Kinds(), project, &run.Observation{Config: cfg.Config, Facts: facts,
		Result: &run.Result{Plan: res.Plan, Work: res.Work, Fabric: res.Addrs, Notes: res.Notes}})
}

// kindEnv is what the run hands the kinds' steps, from a StepEnv (the
// fake lab's, steplab.Lab.Env).
func kindEnv(e *stepenv.StepEnv) *kind.Env {
	return &kind.Env{Conns: e.Conns, Project: e.Project, Parallelism: e.Parallelism, Poll: e.Poll, ReadyTimeout: e.RayReadyTimeout,
		ProgressInterval: e.ProgressInterval, State: e.State, Log: e.Log, NotAtomic: e.NotAtomic, Prepared: e.Prepared,
		Now: e.Now, Sleep: e.Sleep}
}

// Steps are the steps of w's kind in env (run.StepsOf).
func Steps(env *stepenv.StepEnv, w *Work) []apply.Step { return run.StepsOf(Kinds(), kindEnv(env), w) }

// PrepareSteps are the steps of w's kind that run before the walk
// (run.PrepareStepsOf).
func PrepareSteps(env *stepenv.StepEnv, w *Work) []apply.Step {
	return run.PrepareStepsOf(Kinds(), kindEnv(env), w)
}
