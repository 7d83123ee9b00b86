package run

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

// Plan computes the plan with the kinds of kinds, each in registration
// order. It is a pure function of its input.
func Plan(kinds kind.Registry, in PlanInput) *Result {
	p := &planner{kinds: kinds, in: in, cfg: in.Config, facts: in.Facts, res: &Result{Plan: &plan.Plan{RefreshOnly: in.RefreshOnly}, Work: map[string]*kind.Work{}}}
	if p.facts == nil {
		p.facts = &observe.Facts{Hosts: map[string]*observe.HostFacts{}}
	}
	p.addrs = fabric(kinds, p.cfg, p.facts).Addrs
	p.res.Fabric = p.addrs
	for _, k := range kinds {
		k.Plan(p)
	}
	p.removed()
	p.commandLimits()
	p.outputs()
	if in.RefreshOnly {
		p.res.Work = map[string]*kind.Work{}
	}
	p.res.Plan.SortChanges()
	return p.res
}

// planner is the kind.Planner the kinds plan through: the plan's inputs,
// and the result they add to.
type planner struct {
	kinds kind.Registry
	in    PlanInput
	cfg   *config.Config
	facts *observe.Facts
	res   *Result
	// addrs are the nodes' fabric addresses (kind.KindWithFabric).
	addrs map[string]netip.Addr
}

// Config is the evaluated configuration (kind.Planner).
func (p *planner) Config() *config.Config { return p.cfg }

// Facts are the observed hosts (kind.Planner).
func (p *planner) Facts() *observe.Facts { return p.facts }

// State is the state, nil when there is none (kind.Planner).
func (p *planner) State() *state.State { return p.in.State }

// Project is the project's label value (kind.Planner).
func (p *planner) Project() string { return p.in.Project }

// Replace reports whether -replace named addr (kind.Planner).
func (p *planner) Replace(addr string) bool { return p.in.Replace[addr] }

// RefreshOnly reports whether the plan only refreshes (kind.Planner).
func (p *planner) RefreshOnly() bool { return p.in.RefreshOnly }

// Fabric is node's observed fabric address (kind.Planner).
func (p *planner) Fabric(node string) (netip.Addr, bool) {
	a, ok := p.addrs[node]
	return a, ok
}

// Planned is the action planned so far for addr (kind.Planner).
func (p *planner) Planned(addr string) (plan.Action, bool) {
	for _, ch := range p.res.Plan.Changes {
		if ch.Address == addr {
			return ch.Action, true
		}
	}
	return plan.NoOp, false
}

// Change adds a resource's change to the plan (kind.Planner).
func (p *planner) Change(ch plan.ResourceChange) { p.res.Plan.Changes = append(p.res.Plan.Changes, ch) }

// Finding adds a finding to the plan (kind.Planner).
func (p *planner) Finding(f plan.Finding) { p.res.Plan.Findings = append(p.res.Plan.Findings, f) }

// Drift adds drift to the plan (kind.Planner).
func (p *planner) Drift(d plan.Drift) { p.res.Plan.Drift = append(p.res.Plan.Drift, d) }

// Note adds a note to the result (kind.Planner).
func (p *planner) Note(n string) { p.res.Notes = append(p.res.Notes, n) }

// Unreachable records that node could not be observed (kind.Planner).
func (p *planner) Unreachable(node string) {
	p.res.Plan.Unreachable = append(p.res.Plan.Unreachable, node)
}

// AddWork records w (kind.Planner).
func (p *planner) AddWork(w *kind.Work) { p.res.Work[w.Address] = w }

// Work is the work recorded so far for addr (kind.Planner).
func (p *planner) Work(addr string) *kind.Work { return p.res.Work[addr] }

// outputs lists the root outputs with what applying the plan does to
// them: created with a resource they refer to (or, for one that refers to
// none, on a first apply), updated when what they show of those resources
// changes (an attribute they read, or one a computed attribute they read
// derives from), and left alone (not shown as a change) otherwise.
func (p *planner) outputs() {
	changes := map[string]plan.ResourceChange{}
	for _, ch := range p.res.Plan.Changes {
		changes[ch.Address] = ch
	}
	exported := map[string]map[string]bool{}
	computed := map[string]map[string][]string{} // type → computed attribute → From (nil: unknown)
	for _, k := range p.kinds {
		exported[k.Schema().Type] = k.Traits().Exported
		computed[k.Schema().Type] = map[string][]string{}
		for _, a := range k.Schema().Computed {
			computed[k.Schema().Type][a.Name] = a.From
		}
	}
	first := p.in.State == nil || len(p.in.State.Addresses()) == 0
	g := p.cfg.Graph()
	for _, name := range slices.Sorted(maps.Keys(p.cfg.Outputs)) {
		o := p.cfg.Outputs[name]
		oc := plan.OutputChange{Name: name, Value: o.Value, Sensitive: o.Sensitive, Action: plan.NoOp}
		// An output that is one attribute of a resource it refers to
		// changes with that attribute; any other changes when the resource
		// is created or one of its exported attributes changes.
		onResources := false
		var same, changed []plan.AttrChange
		for _, dep := range g.DependenciesOf("output." + name) {
			ch, ok := changes[dep]
			if !ok {
				continue
			}
			onResources = true
			if ch.Action == plan.Create {
				oc.Action = plan.Create
			}
			reads, known := o.Reads[dep]
			for _, a := range ch.Attrs {
				if !exported[ch.Type][a.Name] {
					continue
				}
				if a.After.RawEquals(o.Value) {
					same = append(same, a)
				}
				if a.Changed() && (!known || readsFrom(reads, a.Name, computed[ch.Type])) {
					changed = append(changed, a)
				}
			}
		}
		switch {
		case oc.Action == plan.Create:
		case !onResources:
			if first {
				oc.Action = plan.Create
			}
		case len(same) > 0:
			for _, a := range same {
				if a.Changed() {
					oc.Action, oc.Before = plan.Update, a.Before
				}
			}
		case len(changed) > 0:
			oc.Action = plan.Update
		}
		p.res.Plan.Outputs = append(p.res.Plan.Outputs, oc)
	}
}

// readsFrom reports whether an output that reads the attributes reads of
// a resource (config.Output.Reads) shows its argument arg: it reads arg
// itself, the resource as a whole, or a computed attribute derived from
// arg (config.Attr.From; one whose sources are not known counts as
// derived from every argument).
func readsFrom(reads []string, arg string, computed map[string][]string) bool {
	for _, r := range reads {
		from, isComputed := computed[r]
		switch {
		case r == "" || r == arg:
			return true
		case isComputed && (from == nil || slices.Contains(from, arg)):
			return true
		}
	}
	return false
}

// HostFingerprints digests, per host, the facts a plan depends on, so a
// saved plan can be refused (naming the host) when the hosts changed since
// it was made.
func HostFingerprints(kinds kind.Registry, facts *observe.Facts) map[string]string {
	out := map[string]string{}
	for name, hf := range facts.Hosts {
		var parts []string
		parts = append(parts, "err "+hf.Err)
		for _, a := range hf.Addresses.List {
			parts = append(parts, "addr "+a.Interface+"="+a.Prefix.String())
		}
		for _, c := range hf.Containers.List {
			parts = append(parts, fmt.Sprintf("container %s %s %s %v %s", c.Name, c.ID, c.SpecHash, c.Running, c.StartedAt.UTC().Format(time.RFC3339Nano)))
		}
		for u, r := range hf.HTTP {
			// The status, not the body: vLLM's /v1/models carries the
			// time of the request; the kinds say what else of it counts
			// (kind.KindWithFingerprint).
			parts = append(parts, fmt.Sprintf("http %s %d %s", u, r.Status, r.HeldBy))
		}
		for _, k := range kind.With[kind.KindWithFingerprint](kinds) {
			parts = append(parts, k.Fingerprint(hf)...)
		}
		for k, sr := range hf.Records {
			parts = append(parts, fmt.Sprintf("serve %s %s %v", k, sr.SpecHash, sr.Alive))
		}
		for _, im := range hf.Images {
			parts = append(parts, fmt.Sprintf("image %s %v %s", im.Ref, im.Present, im.ID))
		}
		sort.Strings(parts)
		sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
		out[name] = hex.EncodeToString(sum[:8])
	}
	return out
}

// commandLimits adds an error finding for every resource whose start
// command its host's kernel would refuse (kind.KindWithCommandCheck,
// which apply's prepare asks again): the plan says so before apply stops
// anything that runs.
func (p *planner) commandLimits() {
	for _, addr := range slices.Sorted(maps.Keys(p.res.Work)) {
		if err := checkCommands(p.kinds, p.res.Work[addr], p.in.Project, p.facts); err != nil {
			p.Finding(plan.Finding{Severity: plan.Error, Address: addr,
				Summary: "A command of this resource is too long for its host",
				Detail:  err.Error()})
		}
	}
}

// checkCommands is why a command line of w cannot run on its host, as w's
// kind judges (kind.KindWithCommandCheck); nil for a removal or no-op.
func checkCommands(kinds kind.Registry, w *kind.Work, project string, facts *observe.Facts) error {
	if w.Action == plan.NoOp || w.Action == plan.Delete {
		return nil
	}
	k, ok := kinds.Of(w.Type).(kind.KindWithCommandCheck)
	if !ok {
		return nil
	}
	return k.CheckCommands(kind.CommandCheckRequest{Work: w, Project: project, Facts: facts})
}
