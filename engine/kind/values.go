package kind

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

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

// EarlySteps are steps that run early: Steps of Address, as a node of the
// walk's graph of their own (Node), that the resource at Before waits for.
type EarlySteps struct {
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
	// one's (the engine's destroy order): a ray_cluster's vllm_serves.
	DestroyAfter []string
	// After are the resources (or early steps' nodes, EarlySteps) whose work
	// this one's waits for in apply's walk, beyond the configuration's
	// references: a vllm_serve started after another of its cluster, in
	// the order the GPU budget judged.
	After []string
	// Do is the kind's own description of the work, which only its steps
	// read.
	Do WorkDetail
}

// WorkDetail is a kind's own description of the work on one resource.
type WorkDetail interface {
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
	// EnvKeys are the containers' variables whose values the plan reads
	// (observe.HostSpec.EnvKeys), on every host; the kinds add theirs.
	// Every other value is redacted on the host.
	EnvKeys []string
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

// WithFacts re-evaluates cfg with observed facts (config.Config.WithFacts),
// keeping the secret-digest keys cfg was given where f has none.
func WithFacts(cfg *config.Config, f Facts) (*config.Config, hcl.Diagnostics) {
	if f.SecretKeys == nil {
		f.SecretKeys = ConfigFacts(cfg).SecretKeys
	}
	return cfg.WithFacts(f)
}

// WithSecrets returns a copy of cfg whose facts carry the deployments'
// secret-digest keys and bearer tokens (Facts.SecretKeys, Bearers), which
// the kinds read.
func WithSecrets(cfg *config.Config, keys map[string][]byte, bearers map[string]string) *config.Config {
	out := *cfg
	f := ConfigFacts(&out)
	f.SecretKeys = keys
	f.Bearers = bearers
	out.Facts = f
	return &out
}

// Unsupported is the one step of work no kind can carry out (of a type no
// kind is registered for, or without its kind's own part): it fails,
// naming it.
func Unsupported(w *Work) []apply.Step {
	return []apply.Step{apply.Func{
		Label: "unsupported work",
		RunFunc: func(context.Context, func(string)) error {
			return fmt.Errorf("%s: no steps for a %q resource with action %s", w.Address, w.Type, w.Action)
		},
	}}
}
