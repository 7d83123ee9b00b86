// Package kind is the contract between rayform and a resource kind: a
// small Go interface, [Kind] (schema, traits, plan), that each block type
// (node, network, ray_cluster, vllm_serve, model) implements, optional
// interfaces (WithObserve, WithSteps, WithLogs, ...) for what only some
// kinds do, and the values that pass through them. The resources package
// registers the kinds (resources.Kinds) and reaches each one only through
// these interfaces: planning, the apply steps, destroy, what is present on
// the hosts, logs and the CLI's properties of an address, status and the
// run's locks iterate over the registered kinds, with no switch on a
// kind's name. Each kind lives in a package of its own
// (node, network, cluster, serve, model) and depends on another only
// through this package (a planned action or work looked up by address, a
// Work's Container, Restarter) and through interfaces that block values
// implement (Placed, SecretHolder and Mounter here, network.Member,
// serve.Weights), or through the exported values of a kind it runs on (a
// vllm_serve reads its cluster.RayCluster and cluster.ClusterSpecs), never
// through another kind's internals. What the container kinds share beyond
// this contract lives in small packages of its own: hostenv (the steps'
// environment), kit (planner readings and value checks), attrs (attribute
// records), servedir.
//
// It imports only the engine, so that a kind in a package of its own can
// implement it.
package kind

import (
	"context"
	"io"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
)

// Kind is one resource kind: its schema and its plan. It is the required
// core; whatever else rayform does with a kind's blocks (observe the
// hosts, remove, find present, run steps, print logs, show status, lock)
// a kind does by implementing the optional interface of it (WithObserve,
// WithDestroy, WithPresence, WithSteps, WithPrepare, WithLogs, WithAhead,
// WithAwait, WithFingerprint, WithStatus, WithLocks, WithLookup, Learner,
// Fabricator), which the resources package discovers by type assertion,
// as terraform-plugin-framework's ResourceWith* are: a kind that has no
// resources on the hosts (node, network) implements none of them.
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

// WithLookup is implemented by a kind whose plan needs something from
// outside the hosts (a model's files as its hub lists them).
type WithLookup interface {
	// Lookup asks, once the configuration is evaluated with the observed
	// facts and before the plan, what the kind's plan needs from outside
	// the hosts, and completes the kind's block values in cfg with it. It
	// is the only I/O of a plan besides the observation; ctx bounds it. A
	// kind may ready the question and ask it only when its plan first
	// needs the answer (the model does), so that a destroy, which plans no
	// kind's changes, never depends on anything outside the hosts.
	Lookup(ctx context.Context, cfg *config.Config)
}

// WithObserve is implemented by a kind that asks the hosts about its
// resources.
type WithObserve interface {
	// Observe adds to o.Spec what each host is asked about the kind's
	// resources: those the configuration declares, and those the state
	// remembers that it does not any more.
	Observe(o *Observation)
}

// WithDestroy is implemented by a kind whose resources are removed from
// the hosts.
type WithDestroy interface {
	// Destroy plans the removal of the kind's resources that d dooms (all
	// of them for rayform destroy, those that left the configuration for
	// apply), from what d's facts show on the hosts. Kinds are asked in
	// registration order; Destroyer.Before orders their removals.
	Destroy(d Destroyer)
}

// WithPresence is implemented by a kind whose resources the hosts hold.
type WithPresence interface {
	// Present reports, through p, which of the project's resources of
	// this kind the observed hosts hold.
	Present(p *Presence)
}

// WithSteps is implemented by a kind whose work apply carries out in its
// walk.
type WithSteps interface {
	// Steps returns the steps that carry out w (a Work of this kind);
	// nil when there is nothing to do.
	Steps(env Env, w *Work) []apply.Step
}

// WithPrepare is implemented by a kind whose work has steps that apply
// runs before its walk.
type WithPrepare interface {
	// PrepareSteps are the steps of w that prove, before anything is
	// removed or stopped, that what w creates can be created, changing
	// nothing that runs; apply runs them for every resource before its
	// walk.
	PrepareSteps(env Env, w *Work) []apply.Step
}

// WithLogs is implemented by a kind whose resources have logs: rayform
// logs ADDRESS prints them.
type WithLogs interface {
	// Logs returns the commands that print the logs of resource q.Address
	// of this kind.
	Logs(q LogQuery) ([]LogCommand, error)
}

// WithAhead is implemented by a kind whose work may run ahead of the walk.
type WithAhead interface {
	// Ahead returns work of this kind's resources that must run ahead of
	// the walk, before another resource of ws changes (a serve stopped
	// before its cluster's containers are replaced); steps are the walk's
	// steps by address.
	Ahead(env Env, ws map[string]*Work, steps map[string][]apply.Step) []Ahead
}

// WithAwait is implemented by a kind whose resources may be running as
// declared but not ready yet.
type WithAwait interface {
	// Starting returns, for the kind's resources that the hosts show
	// running as declared but not ready yet, the work of waiting for them
	// (AwaitSteps): apply waits for them whether or not it changed them.
	Starting(cfg *config.Config, facts *observe.Facts) []*Work
	// AwaitSteps are the steps that wait for w (from Starting) to be
	// ready.
	AwaitSteps(env Env, w *Work) []apply.Step
}

// WithFingerprint is implemented by a kind whose reading of the hosts a
// saved plan commits to.
type WithFingerprint interface {
	// Fingerprint returns what a saved plan commits to of hf beyond the
	// facts every plan reads (containers, HTTP statuses, records, images):
	// the kind's reading of them (Ray's node table, by its rows).
	Fingerprint(hf *observe.HostFacts) []string
}

// WithStatus is implemented by a kind whose resources status shows (under
// Traits.Status).
type WithStatus interface {
	// Status reports what status shows of each of the kind's resources
	// the configuration declares, judged as the plan judges them.
	Status(q StatusQuery) []Status
}

// WithLocks is implemented by a kind whose resources a run locks.
type WithLocks interface {
	// Locks are the locks a run takes for the kind's resources, those
	// cfg declares and those st remembers (st nil: none).
	Locks(cfg *config.Config, st *state.State) []Lock
}

// HasLogs reports whether rayform logs prints the logs of k's resources
// (WithLogs).
func HasLogs(k Kind) bool {
	_, ok := k.(WithLogs)
	return ok
}

// StatusQuery is what Kind.Status reads: one observation of the hosts
// and the plan made from it.
type StatusQuery struct {
	Config  *config.Config
	Facts   *observe.Facts
	Plan    *plan.Plan
	Project string
}

// Status is what status shows of one resource.
type Status struct {
	Address string
	// Value is its entry in status -json's list of its kind.
	Value any
	// Problems are what is wrong with it, one line each.
	Problems []string
	// Render prints it as text.
	Render func(w io.Writer)
}

// Ahead is work that runs ahead of the walk: Steps of Address, as a node
// of the walk's graph of its own (Node), that Before waits for.
type Ahead struct {
	Node, Before, Address string
	Action                plan.Action
	Steps                 []apply.Step
}

// Lock is one lock a run takes: Resource's lock named Key, on Host.
type Lock struct {
	Resource, Key, Host string
	// FromState says the state, not the configuration, names the host.
	FromState bool
}

// Traits are a kind's properties as data. What a kind does (logs, status,
// steps...) follows from the optional interfaces it implements, not from
// a trait.
type Traits struct {
	// Replaceable says that apply -replace=ADDRESS may name a resource of
	// the kind (a cluster recreates its containers, a serve restarts).
	Replaceable bool
	// Exported names the attributes of a planned change of the kind that
	// an output may show (an output changes with them).
	Exported map[string]bool
	// Status is the key of the list of the kind's resources in status
	// -json ("" for a kind status does not list).
	Status string
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
	// After are the resources (or ahead nodes, kind.Ahead) whose work
	// this one's waits for in apply's walk, beyond the configuration's
	// references: a vllm_serve started after another of its cluster, in
	// the order the GPU budget judged.
	After []string
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

// Facts are what observing the hosts teaches the configuration
// (config.Config.WithFacts): the kinds read them in their hooks (FactsOf)
// to compute what depends on the hosts.
type Facts struct {
	// FabricAddrs maps a node name to the node's observed address on the
	// network of its Ray cluster.
	FabricAddrs map[string]netip.Addr
	// Hosts are the observed hosts themselves (nil before they are
	// observed): a kind's Lookup judges by them what it cannot ask
	// outside (a model's manifest recorded on the nodes when the hub does
	// not answer).
	Hosts *observe.Facts
	// SecretKeys are the deployments' secret-digest keys by ray_cluster
	// name, as read from each cluster's head (attrs.SecretDigest); a
	// cluster without one digests its secrets unkeyed.
	SecretKeys map[string][]byte
	// Bearers are the deployments' bearer tokens by ray_cluster name, as
	// read from each cluster's head (observe.BearerFile): what Ray's token
	// authentication demands; none before the lock holder made one.
	Bearers map[string]string
}

// Learner is implemented by a kind whose blocks are evaluated with what
// the hosts show (the ray_cluster: its nodes' fabric addresses, its
// secret-digest keys): Learn adds it to f, from cfg as loaded and the
// observed hosts, before the configuration is evaluated with f.
type Learner interface {
	Learn(cfg *config.Config, hosts *observe.Facts, project string, f *Facts)
}

// Fabricator is implemented by a kind that puts nodes on a fabric (the
// ray_cluster, on its network): each node's observed address on it, and
// the interface that holds it.
type Fabricator interface {
	Fabric(cfg *config.Config, hosts *observe.Facts) (map[string]netip.Addr, map[string]string)
}

// BlocksOf returns the evaluated blocks of type typ in c as their Go type
// T (a kind's typed view of a configuration), by name.
func BlocksOf[T any](c *config.Config, typ string) map[string]*T {
	out := map[string]*T{}
	for name, v := range c.Blocks(typ) {
		out[name] = v.(*T)
	}
	return out
}

// ConfigFacts returns the facts cfg was evaluated with (or given, for
// SecretKeys); none before the hosts are observed.
func ConfigFacts(cfg *config.Config) Facts {
	f, _ := cfg.Facts.(Facts)
	return f
}

// FactsOf returns the facts a block is evaluated with; none before the
// hosts are observed.
func FactsOf(b *config.Block) Facts {
	f, _ := b.Facts().(Facts)
	return f
}

// Placed is implemented by the Go value of a block whose resource runs on
// nodes: a ray_cluster on its nodes, a vllm_serve on its cluster's, head
// first. A kind learns from it, through values, where a block that uses
// its own (a serve that loads a model) runs.
type Placed interface {
	PlacedOn(cfg *config.Config) []string
}

// SecretHolder is implemented by the Go value of a block that runs on a
// Ray cluster's containers with sensitive values a digest records (a
// vllm_serve's api_key or secret env on its ray_cluster): the cluster
// reads its secret-digest key only when it or such a block has any.
type SecretHolder interface {
	// HasSecretsOn reports whether the block runs on the ray_cluster
	// named cluster and has a sensitive value a digest records.
	HasSecretsOn(cluster string) bool
}

// SecretsOn reports whether a block of cfg holds secrets on the cluster
// named cluster (SecretHolder).
func SecretsOn(cfg *config.Config, cluster string) bool {
	for _, typ := range cfg.Kinds() {
		for _, v := range cfg.Blocks(typ) {
			if h, ok := v.(SecretHolder); ok && h.HasSecretsOn(cluster) {
				return true
			}
		}
	}
	return false
}

// Listener is implemented by the Go value of a block that runs a server in
// a Ray cluster's head container (a vllm_serve's API): the cluster's
// exposure report (status) names it and says whether it demands a key.
type Listener interface {
	// ListensOn returns the port the block's server listens on in the
	// ray_cluster named cluster, and whether it demands a key; ok is false
	// when the block does not run there.
	ListensOn(cluster string) (port int, keyed, ok bool)
}

// ListenersOn returns, by port, whether each server a block of cfg runs
// in the cluster named cluster demands a key (Listener).
func ListenersOn(cfg *config.Config, cluster string) map[int]bool {
	out := map[int]bool{}
	for _, typ := range cfg.Kinds() {
		for _, v := range cfg.Blocks(typ) {
			if l, ok := v.(Listener); ok {
				if port, keyed, on := l.ListensOn(cluster); on {
					out[port] = keyed
				}
			}
		}
	}
	return out
}

// Mounter is implemented by the Go value of a block that runs in a Ray
// cluster's containers and needs host directories mounted in them at the
// same path (a vllm_serve's model weights): the cluster mounts them.
type Mounter interface {
	// MountsOn lists the host directories the block needs in the
	// containers of the ray_cluster named cluster (none when it does not
	// run there).
	MountsOn(cfg *config.Config, cluster string) []string
}

// MountsOn lists, in order (kinds in registration order, blocks by name),
// the host directories the blocks of cfg need in the containers of the
// cluster named cluster (Mounter); a directory may repeat.
func MountsOn(cfg *config.Config, cluster string) []string {
	var out []string
	for _, typ := range cfg.Kinds() {
		blocks := cfg.Blocks(typ)
		for _, name := range slices.Sorted(maps.Keys(blocks)) {
			if m, ok := blocks[name].(Mounter); ok {
				out = append(out, m.MountsOn(cfg, cluster)...)
			}
		}
	}
	return out
}

// Usable returns the facts of node if it could be observed (completely,
// or in part with its error noted), nil otherwise: what a plan may judge
// the node by.
func Usable(f *observe.Facts, node string) *observe.HostFacts {
	if f == nil {
		return nil
	}
	hf := f.Hosts[node]
	if hf == nil || hf.Err != "" && !hf.Complete {
		return nil
	}
	return hf
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
	// RefreshOnly reports whether the plan only refreshes (apply
	// -refresh-only): it changes nothing, so a kind skips the checks of
	// what a change would do.
	RefreshOnly() bool
	// Fabric is node's observed address on its cluster's network (ok
	// false when unknown).
	Fabric(node string) (netip.Addr, bool)
	// Planned returns the action planned for addr (ok false when no
	// change was planned for it yet): how a resource learns what happens
	// to one it depends on (a serve to its cluster).
	Planned(addr string) (plan.Action, bool)
	// Change, Finding, Drift and Note add to the plan.
	Change(plan.ResourceChange)
	Finding(plan.Finding)
	// Unreachable records that node could not be observed.
	Unreachable(node string)
	Drift(plan.Drift)
	Note(string)
	// AddWork records what apply must do for w.Address.
	AddWork(w *Work)
	// Work returns the work recorded so far for addr (nil when none): how
	// a resource learns what the change of one it depends on does (a
	// serve, which of its cluster's nodes restart: Restarts).
	Work(addr string) *Work
}

// Restarter is implemented by a Work's Do that starts or removes
// containers on nodes (a ray_cluster's): a resource running on those
// nodes (a vllm_serve) restarts with them.
type Restarter interface {
	// Restarts are the nodes whose container the work starts or
	// removes, sorted.
	Restarts() []string
}

// Restarts returns the nodes w restarts (Restarter), nil when none or
// when w is nil.
func Restarts(w *Work) []string {
	if w == nil {
		return nil
	}
	r, ok := w.Do.(Restarter)
	if !ok {
		return nil
	}
	return r.Restarts()
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
	// Status asks, besides what plan reads, what status shows.
	Status bool
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
// the project, the clock and the limits. hostenv.StepEnv implements it;
// the container kinds read the rest of it there (hostenv.Of).
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
	// ProgressEvery throttles repetitive progress lines (transfers,
	// progress bars).
	ProgressEvery() time.Duration
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
	// Previous asks for the log of the process before the current one
	// (a failed or replaced start), where the kind keeps one.
	Previous bool
}

// LogCommand is the shell script that prints one log on one node.
type LogCommand struct {
	Node, Script string
}
