// Package kind is the contract between the engine and a resource kind, as
// terraform-plugin-framework's resource.Resource and its ResourceWith*
// are: a small required core, [Kind] (schema, traits, plan), that each
// block type (node, network, ray_cluster, vllm_serve, model) implements,
// and optional interfaces, each embedding Kind (KindWithObserve,
// KindWithSteps, KindWithLogs, ...), for what only some kinds do. Every
// method takes one request (a struct, or the planner a kind plans through)
// and answers with one value.
//
// engine/run drives the kinds of a [Registry] (the one resources.Kinds
// returns) through these interfaces alone: planning, destroy, what is
// present on the hosts, the apply steps, logs, status and the run's locks
// iterate over the registered kinds, with no switch on a kind's name and
// no type assertion to a kind's own types. Each kind lives in a package
// of its own under resources/ and depends on another only through this
// package (a planned action or work looked up by address, a Work's
// Container, Restarter) and through interfaces that block values
// implement (Placed, SecretHolder, Listener and Mounter here), or through
// the exported values of a kind it runs on (a vllm_serve reads its
// cluster's), never through another kind's internals.
//
// It imports only the engine, so that a kind in a package of its own can
// implement it.
package kind

import (
	"context"
	"net/netip"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/state"
)

// Kind is one resource kind: its schema and its plan. It is the required
// core; whatever else rayform does with a kind's blocks (observe the
// hosts, remove, find present, run steps, print logs, show status, lock)
// a kind does by implementing the optional interface of it, each of
// which embeds Kind and which the engine discovers by type assertion on
// the registered kinds (With): a kind that has no resources on the hosts
// (network) implements none of them.
type Kind interface {
	// Schema describes the block type as data: its arguments, decoding,
	// computed attributes and checks (engine/config evaluates it).
	Schema() config.Kind
	// Traits are the kind's properties the CLI and the planner ask about.
	Traits() Traits
	// Plan plans the kind's resources the configuration declares, through
	// p: their changes, findings, drift and work. Kinds are planned in
	// the order they are registered: a kind may look up (p.Planned) the
	// action of a resource of a kind registered before it.
	Plan(p Planner)
}

// KindWithHosts is implemented by the kind whose blocks are the hosts
// (node): every host it declares is observed, and is reached as it says.
type KindWithHosts interface {
	Kind
	// Hosts lists the hosts cfg declares, sorted by name.
	Hosts(cfg *config.Config) []Host
}

// KindWithLookup is implemented by a kind whose plan needs something from
// outside the hosts (a model's files as its hub lists them).
type KindWithLookup interface {
	Kind
	// Lookup asks, once the configuration is evaluated with the observed
	// facts and before the plan, what the kind's plan needs from outside
	// the hosts, and completes the kind's block values in cfg with it. It
	// is the only I/O of a plan besides the observation; ctx bounds it. A
	// kind may ready the question and ask it only when its plan first
	// needs the answer (the model does), so that a destroy, which plans no
	// kind's changes, never depends on anything outside the hosts.
	Lookup(ctx context.Context, cfg *config.Config)
}

// KindWithHostFacts is implemented by a kind whose blocks are evaluated
// with what the hosts show (the ray_cluster: its nodes' fabric addresses,
// its secret-digest keys and bearer tokens).
type KindWithHostFacts interface {
	Kind
	// HostFacts adds to req.Facts what the kind reads from the observed
	// hosts, from the configuration as loaded, before the configuration
	// is evaluated with them.
	HostFacts(req HostFactsRequest)
}

// HostFactsRequest is what KindWithHostFacts.HostFacts reads and fills.
type HostFactsRequest struct {
	// Config is the configuration as loaded.
	Config  *config.Config
	Hosts   *observe.Facts
	Project string
	// Facts is what the configuration will be evaluated with; the kind
	// adds to it.
	Facts *Facts
}

// KindWithFabric is implemented by a kind that puts nodes on a fabric (the
// ray_cluster, on its network).
type KindWithFabric interface {
	Kind
	// Fabric is each node's observed address on its fabric, and the
	// interface that holds it.
	Fabric(req FabricRequest) Fabric
}

// FabricRequest is what KindWithFabric.Fabric reads.
type FabricRequest struct {
	Config *config.Config
	Hosts  *observe.Facts
}

// Fabric is the nodes' observed fabric addresses and interfaces, by node.
type Fabric struct {
	Addrs  map[string]netip.Addr
	Ifaces map[string]string
}

// KindWithObserve is implemented by a kind that asks the hosts about its
// resources.
type KindWithObserve interface {
	Kind
	// Observe adds to o.Spec what each host is asked about the kind's
	// resources: those the configuration declares, and those the state
	// remembers that it does not any more.
	Observe(o *Observation)
}

// KindWithDestroy is implemented by a kind whose resources are removed
// from the hosts.
type KindWithDestroy interface {
	Kind
	// Destroy plans the removal of the kind's resources that d dooms (all
	// of them for rayform destroy, those that left the configuration for
	// apply), from what d's facts show on the hosts. Kinds are asked in
	// registration order; Destroyer.Before orders their removals.
	Destroy(d Destroyer)
}

// KindWithPresence is implemented by a kind whose resources the hosts
// hold.
type KindWithPresence interface {
	Kind
	// Present reports, through p, which of the project's resources of
	// this kind the observed hosts hold.
	Present(p *Presence)
}

// KindWithCommandCheck is implemented by a kind whose work starts
// processes with command lines built from the configuration, which a
// host's kernel may refuse (too long).
type KindWithCommandCheck interface {
	Kind
	// CheckCommands returns why a command line of req.Work cannot run on
	// its host (nil when all can). The plan turns it into a finding, and
	// apply asks again before anything changes.
	CheckCommands(req CommandCheckRequest) error
}

// CommandCheckRequest is what KindWithCommandCheck.CheckCommands reads.
type CommandCheckRequest struct {
	Work    *Work
	Project string
	// Facts are the observed hosts (their execve limits).
	Facts *observe.Facts
}

// KindWithSteps is implemented by a kind whose work apply carries out in
// its walk.
type KindWithSteps interface {
	Kind
	// Steps returns the steps that carry out req.Work (a Work of this
	// kind); nil when there is nothing to do.
	Steps(req StepsRequest) []apply.Step
}

// StepsRequest asks a kind for the steps of one piece of work.
type StepsRequest struct {
	// Env is what the steps get from the run.
	Env  *Env
	Work *Work
}

// KindWithPrepare is implemented by a kind whose work has steps that apply
// runs before its walk.
type KindWithPrepare interface {
	Kind
	// PrepareSteps are the steps of req.Work that prove, before anything
	// is removed or stopped, that what it creates can be created,
	// changing nothing that runs; apply runs them for every resource
	// before its walk.
	PrepareSteps(req StepsRequest) []apply.Step
}

// KindWithWalk is implemented by a kind whose steps share something across
// apply's whole walk (a vllm_serve's data-plane checks, whose ranks start
// as its cluster's containers start).
type KindWithWalk interface {
	Kind
	// OpenWalk readies it, before any step of the walk is asked for, and
	// keeps it in req.Env.Shared; ctx bounds it. The engine calls the
	// returned function (nil for none) once the walk ended.
	OpenWalk(ctx context.Context, req WalkRequest) (closeWalk func())
}

// WalkRequest is what KindWithWalk.OpenWalk reads.
type WalkRequest struct {
	Env *Env
	// Work is the walk's work, by address.
	Work map[string]*Work
}

// KindWithEarlySteps is implemented by a kind whose work may have steps
// that run early: before the walk reaches another resource.
type KindWithEarlySteps interface {
	Kind
	// EarlySteps returns work of this kind's resources that must run
	// before another resource of req.Work changes (a serve stopped before
	// its cluster's containers are replaced).
	EarlySteps(req EarlyStepsRequest) []EarlySteps
}

// EarlyStepsRequest is what KindWithEarlySteps.EarlySteps reads.
type EarlyStepsRequest struct {
	Env *Env
	// Work is the walk's work, and Steps its steps, by address.
	Work  map[string]*Work
	Steps map[string][]apply.Step
}

// KindWithLogs is implemented by a kind whose resources have logs: rayform
// logs ADDRESS prints them.
type KindWithLogs interface {
	Kind
	// Logs returns the commands that print the logs of resource q.Address
	// of this kind.
	Logs(q LogQuery) ([]LogCommand, error)
}

// KindWithAwait is implemented by a kind whose resources may be running as
// declared but not ready yet.
type KindWithAwait interface {
	Kind
	// Starting returns, for the kind's resources that the hosts show
	// running as declared but not ready yet, the work of waiting for them
	// (AwaitSteps): apply waits for them whether or not it changed them.
	Starting(req StartingRequest) []*Work
	// AwaitSteps are the steps that wait for req.Work (from Starting) to
	// be ready.
	AwaitSteps(req StepsRequest) []apply.Step
}

// StartingRequest is what KindWithAwait.Starting reads.
type StartingRequest struct {
	// Config is evaluated with the observed facts.
	Config *config.Config
	Facts  *observe.Facts
}

// KindWithFingerprint is implemented by a kind whose reading of the hosts
// a saved plan commits to.
type KindWithFingerprint interface {
	Kind
	// Fingerprint returns what a saved plan commits to of hf beyond the
	// facts every plan reads (containers, HTTP statuses, records, images):
	// the kind's reading of them (Ray's node table, by its rows).
	Fingerprint(hf *observe.HostFacts) []string
}

// KindWithStatus is implemented by a kind whose resources status shows
// (under Traits.Status).
type KindWithStatus interface {
	Kind
	// Status reports what status shows of each of the kind's resources
	// the configuration declares, judged as the plan judges them.
	Status(q StatusQuery) []Status
}

// KindWithLocks is implemented by a kind whose resources a run locks.
type KindWithLocks interface {
	Kind
	// Locks are the locks a run takes for the kind's resources, those
	// req.Config declares and those req.State remembers.
	Locks(req LocksRequest) []Lock
}

// LocksRequest is what KindWithLocks.Locks reads.
type LocksRequest struct {
	Config *config.Config
	// State is nil when there is none.
	State *state.State
}

// HasLogs reports whether rayform logs prints the logs of k's resources
// (KindWithLogs).
func HasLogs(k Kind) bool {
	_, ok := k.(KindWithLogs)
	return ok
}
