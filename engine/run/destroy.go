package run

import (
	"fmt"
	"maps"
	"slices"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

// DestroyPlanOf plans the destruction of every resource of the configuration
// and of the state, and of any other container the hosts report with this
// project's labels: each vllm_serve whose process runs is stopped, each
// ray_cluster's containers are removed. Only containers labelled
// rayform.managed=true with in.Project and the resource's address are
// touched (and the removal step re-checks the labels on the host). A
// resource with nothing left on the hosts is planned as a no-op; the caller
// still forgets it.
//
// The graph orders the walk in reverse of creation (OrderDestroy): the
// serves stop before their cluster goes. in.Facts must come from
// ObserveSpec(kinds, in.Config, in.State, in.Project, false).
func DestroyPlanOf(kinds kind.Registry, in PlanInput) (*Result, *dag.Graph) {
	res := &Result{Plan: &plan.Plan{}, Work: map[string]*kind.Work{}}
	d := &destroyer{kinds: kinds, res: res, cfg: in.Config, st: in.State, facts: in.Facts, project: in.Project, all: true,
		present: "destroy", gone: "already gone from the hosts; only forgotten"}
	d.plan()
	for _, u := range Unreached(in.Facts, res.Work) {
		res.Plan.Findings = append(res.Plan.Findings, plan.Finding{Severity: plan.Warning, Address: u.Address, Host: u.Node,
			Summary: fmt.Sprintf("cannot reach %s: what %s has there stays", u.Node, u.Address),
			Detail:  fmt.Sprintf("%s could not be observed (%s), so rayform can neither see nor remove what %s runs there. destroy removes the rest, keeps %s in the state and fails.", u.Node, u.Why, u.Address, u.Address),
			Fix:     fmt.Sprintf("make %s reachable (ssh %s true), then run rayform destroy again", u.Node, u.Node)})
	}
	res.Plan.SortChanges()
	g := dag.New()
	for _, addr := range slices.Sorted(maps.Keys(res.Work)) {
		g.Add(addr)
	}
	OrderDestroy(g, res.Work)
	return res, g
}

// Unreach is one host of a destroyed resource that could not be observed.
type Unreach struct {
	Address, Node string
	// Why is the observation's error.
	Why string
}

// Unreached lists, for each resource of work (a destroy's), the hosts it
// spans that facts could not observe, or whose containers could not be
// read: what the resource has there is unknown, so a destroy cannot say
// it is gone. Sorted by address, then node.
func Unreached(facts *observe.Facts, work map[string]*kind.Work) []Unreach {
	if facts == nil {
		return nil
	}
	var out []Unreach
	for _, addr := range slices.Sorted(maps.Keys(work)) {
		w := work[addr]
		for _, node := range slices.Sorted(slices.Values(slices.Clone(w.Hosts))) {
			hf := facts.Hosts[node]
			why := ""
			switch {
			case facts.Errors[node] != nil:
				why = facts.Errors[node].Error()
			case hf == nil:
				why = "not observed"
			case hf.Err != "" && !hf.Complete:
				why = hf.Err
			case hf.Containers.Err != "":
				why = "its containers could not be listed: " + hf.Containers.Err
			default:
				continue
			}
			out = append(out, Unreach{Address: addr, Node: node, Why: why})
		}
	}
	return out
}

// removed plans the destruction of resources that left the configuration,
// from what the state remembers of them, as DestroyPlanOf does.
func (p *planner) removed() {
	if p.in.State == nil {
		return
	}
	// Even a resource already gone is forgotten by apply.
	const why = "not in the configuration any more"
	d := &destroyer{kinds: p.kinds, res: p.res, cfg: p.cfg, st: p.in.State, facts: p.facts, project: p.in.Project, present: why, gone: why}
	d.plan()
}

// OrderDestroy adds to g the order in which the resources of work that g
// holds are destroyed: a resource goes only after those in its
// Work.DestroyAfter (a ray_cluster's containers after the vllm_serves that
// ran on it have stopped). It is the one destroy order, of rayform destroy
// (DestroyPlanOf) and of the resources an apply removes. A resource the
// apply starts on a host waits for the removals on that host: what they
// hold (ports on the host's network, GPUs) is free when it starts (a
// renamed ray_cluster's head takes its old ports).
func OrderDestroy(g *dag.Graph, work map[string]*kind.Work) {
	for _, addr := range slices.Sorted(maps.Keys(work)) {
		if !g.Has(addr) {
			continue
		}
		for _, first := range work[addr].DestroyAfter {
			if g.Has(first) {
				g.Connect(addr, first)
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(work)) {
		w := work[addr]
		if !g.Has(addr) || w.Action == plan.Delete || w.Action == plan.NoOp {
			continue
		}
		for _, gone := range slices.Sorted(maps.Keys(work)) {
			if d := work[gone]; d.Action == plan.Delete && g.Has(gone) && sharesHost(w.Hosts, d.Hosts) {
				g.Connect(addr, gone)
			}
		}
	}
}

// sharesHost reports whether a and b name a node in common.
func sharesHost(a, b []string) bool {
	for _, h := range a {
		if slices.Contains(b, h) {
			return true
		}
	}
	return false
}

// destroyer plans the removal of resources, kind by kind (kind.Destroyer).
type destroyer struct {
	kinds kind.Registry
	res   *Result
	cfg   *config.Config // nil when none is loaded
	st    *state.State
	facts *observe.Facts
	// project is the rayform.project label's value.
	project string
	// all dooms the configuration's resources too, and adopts the
	// project's containers found under other addresses (rayform destroy).
	all bool
	// present and gone are the reasons of a removal with something on the
	// hosts and of one without.
	present, gone string
	// added are the removals planned, by address.
	added map[string]*kind.Work
}

// plan asks every kind, in registration order, to plan the removal of
// its doomed resources.
func (d *destroyer) plan() {
	if d.facts == nil {
		d.facts = &observe.Facts{Hosts: map[string]*observe.HostFacts{}}
	}
	d.added = map[string]*kind.Work{}
	for _, k := range kind.With[kind.KindWithDestroy](d.kinds) {
		k.Destroy(d)
	}
}

// Doomed lists the addresses of type typ to remove (kind.Destroyer).
func (d *destroyer) Doomed(typ string) []string {
	set := map[string]bool{}
	if d.all && d.cfg != nil {
		for name := range d.cfg.Blocks(typ) {
			set[typ+"."+name] = true
		}
	}
	if d.st != nil {
		for _, addr := range d.st.Addresses() {
			if plan.ParseAddress(addr).Type == typ && (d.all || d.cfg == nil || !kind.Declared(d.cfg, addr)) {
				set[addr] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Config is the configuration, nil when none is loaded (kind.Destroyer).
func (d *destroyer) Config() *config.Config { return d.cfg }

// State is the state, nil when none (kind.Destroyer).
func (d *destroyer) State() *state.State { return d.st }

// Facts are the observed hosts (kind.Destroyer).
func (d *destroyer) Facts() *observe.Facts { return d.facts }

// Project is the project's label value (kind.Destroyer).
func (d *destroyer) Project() string { return d.project }

// Adopt says whether the project's containers under other addresses are
// doomed too (kind.Destroyer).
func (d *destroyer) Adopt() bool { return d.all }

// Add records a removal (kind.Destroyer).
func (d *destroyer) Add(w *kind.Work, name string, onHosts bool) {
	addDestroy(d.res, w, name, onHosts, d.present, d.gone)
	d.added[w.Address] = w
}

// Works are the removals planned so far (kind.Destroyer).
func (d *destroyer) Works() map[string]*kind.Work { return d.added }

// Before orders the removal of first before that of then, when both are
// removed (kind.Destroyer).
func (d *destroyer) Before(first, then string) {
	if w := d.added[then]; w != nil && d.added[first] != nil && !slices.Contains(w.DestroyAfter, first) {
		w.DestroyAfter = append(w.DestroyAfter, first)
	}
}

// Finding adds a finding (kind.Destroyer).
func (d *destroyer) Finding(f plan.Finding) { d.res.Plan.Findings = append(d.res.Plan.Findings, f) }

// addDestroy records w, a delete where something is on the hosts and a no-op
// otherwise, and its change: the hosts it leaves.
func addDestroy(res *Result, w *kind.Work, name string, onHosts bool, present, gone string) {
	w.Action = plan.Delete
	reason := present
	if !onHosts {
		w.Action, reason = plan.NoOp, gone
	}
	res.Work[w.Address] = w
	res.Plan.Changes = append(res.Plan.Changes, plan.ResourceChange{Address: w.Address, Type: w.Type, Name: name, Action: w.Action, Hosts: w.Hosts,
		Reasons: []string{reason},
		Attrs:   []plan.AttrChange{{Name: "hosts", Before: hostsValue(w.Hosts), After: cty.NullVal(cty.List(cty.String))}}})
}

// hostsValue is hosts as a change's list attribute (an empty list, not
// null, for none).
func hostsValue(hosts []string) cty.Value {
	if len(hosts) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vs := make([]cty.Value, 0, len(hosts))
	for _, h := range hosts {
		vs = append(vs, cty.StringVal(h))
	}
	return cty.ListVal(vs)
}
