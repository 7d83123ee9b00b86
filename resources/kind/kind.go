// Package kind is the contract between rayform and a resource kind: one
// Go interface, [Kind], that each block type (node, network, ray_cluster,
// vllm_serve, model) implements, and the values that pass through it. The
// resources package registers the kinds (resources.Kinds) and reaches each
// one only through this interface: planning, the apply steps, destroy,
// what is present on the hosts, logs and the CLI's properties of an
// address iterate over the registered kinds, with no switch on a kind's
// name. A kind depends on another only through the values this package
// carries (a Work's Container, a planned Action looked up by address), never
// through the other's Go types.
//
// It imports only the engine, so that a kind in a package of its own
// (resources/model) can implement it.
package kind

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
)

// Kind is one resource kind: its schema and everything rayform does with
// its blocks.
type Kind interface {
	// Schema describes the block type as data: its arguments, decoding,
	// computed attributes and checks (engine/config evaluates it).
	Schema() config.Kind
	// Traits are the kind's properties the CLI and the planner ask about.
	Traits() Traits
	// Observe adds to o.Spec what each host is asked about the kind's
	// resources: those the configuration declares, and those the state
	// remembers that it does not any more.
	Observe(o *Observation)
	// Plan plans the kind's resources the configuration declares, through
	// p: their changes, findings, drift and work. Kinds are planned in
	// the order they are registered: a kind may look up (p.Planned) the
	// action of a resource of a kind registered before it.
	Plan(p Planner)
	// Destroy plans the removal of the kind's resources that d dooms (all
	// of them for rayform destroy, those that left the configuration for
	// apply), from what d's facts show on the hosts. Kinds are asked in
	// registration order; Destroyer.Before orders their removals.
	Destroy(d Destroyer)
	// Present reports, through p, which of the project's resources of
	// this kind the observed hosts hold.
	Present(p *Presence)
	// Steps returns the steps that carry out w (a Work of this kind);
	// nil when there is nothing to do.
	Steps(env Env, w *Work) []apply.Step
	// PrepareSteps are the steps of w that prove, before anything is
	// removed or stopped, that what w creates can be created, changing
	// nothing that runs; apply runs them for every resource before its
	// walk.
	PrepareSteps(env Env, w *Work) []apply.Step
	// Logs returns the commands that print the logs of resource q.Address
	// of this kind.
	Logs(q LogQuery) ([]LogCommand, error)
}

// Traits are a kind's properties as data.
type Traits struct {
	// Replaceable says that apply -replace=ADDRESS may name a resource of
	// the kind (what a replacement does is ReplaceDoc).
	Replaceable bool
	// Logs says that rayform logs ADDRESS prints its logs.
	Logs bool
	// Exported names the attributes of a planned change of the kind that
	// an output may show (an output changes with them).
	Exported map[string]bool
}

// Exported returns the arguments of schema that expressions may refer to,
// for Traits.Exported.
func Exported(schema config.Kind) map[string]bool {
	out := map[string]bool{}
	for _, a := range schema.Args {
		if a.Exported {
			out[a.Name] = true
		}
	}
	for _, a := range schema.Computed {
		out[a.Name] = true
	}
	return out
}

// Work is what apply must do for one resource: the engine's part (address,
// action, hosts, order) and the kind's own value, Do, that only the kind's
// Steps read.
type Work struct {
	Address string
	// Type is the kind's block type.
	Type   string
	Action plan.Action
	// Hosts are the nodes the resource lives on (for the state file).
	Hosts []string
	// DestroyAfter are the resources whose destruction goes before this
	// one's (resources.OrderDestroy): a ray_cluster's vllm_serves.
	DestroyAfter []string
	// Do is the kind's own description of the work.
	Do Doer
}

// Doer is a kind's own description of the work on one resource.
type Doer interface {
	// Container is the container the resource runs in, as the state
	// records it ("" for none).
	Container() string
}

// Container is w's container ("" for none or a nil w.Do).
func (w *Work) Container() string {
	if w == nil || w.Do == nil {
		return ""
	}
	return w.Do.Container()
}

// Planner is what a kind plans through: the inputs of the plan, and where
// its results go.
type Planner interface {
	// Config is the configuration, evaluated with the observed facts.
	Config() *config.Config
	// Facts are the observed hosts.
	Facts() *observe.Facts
	// State is the state (nil when there is none).
	State() *state.State
	// Project is the value of the rayform.project label.
	Project() string
	// Replace reports whether apply -replace named addr.
	Replace(addr string) bool
	// Planned returns the action planned for addr (ok false when no
	// change was planned for it yet): how a resource learns what happens
	// to one it depends on (a serve to its cluster).
	Planned(addr string) (plan.Action, bool)
	// Change, Finding, Drift and Note add to the plan.
	Change(plan.ResourceChange)
	Finding(plan.Finding)
	Drift(plan.Drift)
	Note(string)
	// AddWork records what apply must do for w.Address.
	AddWork(w *Work)
}

// Destroyer is what a kind plans the removal of its resources through.
type Destroyer interface {
	// Doomed lists the addresses of type typ that are to be removed
	// (the configuration's, for rayform destroy, and the state's that
	// the configuration does not declare), sorted. The kind adds those
	// the hosts show (with Adopt) itself.
	Doomed(typ string) []string
	// Config is the configuration (nil when none is loaded or, for apply,
	// the configuration's resources are not doomed); State the state
	// (nil when there is none).
	Config() *config.Config
	State() *state.State
	Facts() *observe.Facts
	Project() string
	// Adopt says that a container of the project found on the hosts under
	// an address not doomed yet is doomed too (rayform destroy leaves
	// nothing of the project).
	Adopt() bool
	// Add records w, a delete where onHosts and a no-op otherwise, and its
	// change (the hosts it leaves).
	Add(w *Work, name string, onHosts bool)
	// Works are the removals planned so far, by address.
	Works() map[string]*Work
	// Before orders the removal of first before that of then.
	Before(first, then string)
	Finding(plan.Finding)
}

// Observation is what Kind.Observe reads and fills.
type Observation struct {
	Config  *config.Config
	State   *state.State // nil means none
	Project string
	// Spec is the observation being built; the kinds add to its hosts.
	Spec *observe.Spec
}

// Host returns the spec of node, created with the project when new; the
// caller stores it back with SetHost.
func (o *Observation) Host(node string) observe.HostSpec {
	hs := o.Spec.Hosts[node]
	hs.Project = o.Project
	return hs
}

// SetHost stores node's spec.
func (o *Observation) SetHost(node string, hs observe.HostSpec) { o.Spec.Hosts[node] = hs }

// Remembered returns the addresses of type typ the state records that the
// configuration no longer declares, sorted.
func (o *Observation) Remembered(typ string) []string {
	if o.State == nil {
		return nil
	}
	var out []string
	for _, addr := range o.State.Addresses() {
		if a := plan.ParseAddress(addr); a.Type == typ && !Declared(o.Config, addr) {
			out = append(out, addr)
		}
	}
	return out
}

// Declared reports whether cfg declares the resource at addr.
func Declared(cfg *config.Config, addr string) bool {
	if cfg == nil {
		return false
	}
	a := plan.ParseAddress(addr)
	_, ok := cfg.Blocks(a.Type)[a.Instance()]
	return ok
}

// Presence is what Kind.Present reads and fills.
type Presence struct {
	Config  *config.Config // nil when none is loaded
	State   *state.State   // nil means none
	Facts   *observe.Facts
	Project string
	// Known returns the facts of node, or false (and marks the node
	// unknown) when its containers could not be read: what it holds is
	// unknown, not absent.
	Known func(node string) (*observe.HostFacts, bool)
	// Add reports that resource addr of type typ is on node, in
	// container.
	Add func(addr, typ, node, container string)
	// Head reports that addr's head is on node.
	Head func(addr, node string)
}

// Env is what the steps of a kind see of the apply: a connection per node,
// the project, the clock and the limits. The resources package's StepEnv
// implements it; a kind of that package reads the rest of it there.
type Env interface {
	// Conn is the open connection to node (nil when there is none).
	Conn(node string) transport.Conn
	// ProjectName is the value of the rayform.project label.
	ProjectName() string
	// Logger receives debug lines.
	Logger() hclog.Logger
	// Clock is the time now.
	Clock() time.Time
	// Wait waits d or until ctx ends.
	Wait(ctx context.Context, d time.Duration) error
	// PollInterval is the time between two reads of a condition not met
	// yet.
	PollInterval() time.Duration
	// MaxParallel bounds the hosts worked on at once within one step.
	MaxParallel() int
}

// LogQuery asks for the logs of one resource.
type LogQuery struct {
	Config  *config.Config
	Project string
	Address string
	// Node limits the logs to one node ("" for all).
	Node string
	// Follow keeps following the logs.
	Follow bool
	// Tail is the number of lines from the end (-1 for all).
	Tail int
	// Since is docker logs' --since ("" for none).
	Since string
}

// LogCommand is the shell script that prints one log on one node.
type LogCommand struct {
	Node, Script string
}

// Base implements the parts of Kind a kind without resources on the hosts
// (node, network) does not need: no observation of its own, no work, no
// steps, nothing present, no logs. Embed it and implement Schema, Traits
// and Plan.
type Base struct{}

// Observe asks nothing.
func (Base) Observe(*Observation) {}

// Destroy removes nothing.
func (Base) Destroy(Destroyer) {}

// Present finds nothing.
func (Base) Present(*Presence) {}

// Steps does nothing.
func (Base) Steps(Env, *Work) []apply.Step { return nil }

// PrepareSteps does nothing.
func (Base) PrepareSteps(Env, *Work) []apply.Step { return nil }

// Logs has no logs.
func (Base) Logs(q LogQuery) ([]LogCommand, error) { return nil, ErrNoLogs }

// ErrNoLogs is returned by Logs of a kind without logs.
var ErrNoLogs = errNoLogs{}

type errNoLogs struct{}

func (errNoLogs) Error() string { return "this kind of resource has no logs" }
