package resources

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

// DestroyWork plans the destruction of every resource of the configuration
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
// ObserveSpec(in.Config, in.State, in.Project).
func DestroyWork(in PlanInput) (*Result, *dag.Graph) {
	res := &Result{Plan: &plan.Plan{}, Work: map[string]*Work{}}
	d := newDoomed()
	if in.Config != nil {
		d.fromConfig(in.Config)
	}
	if in.State != nil {
		for _, addr := range in.State.Addresses() {
			r, _ := in.State.Get(addr)
			d.fromState(addr, r)
		}
	}
	d.plan(res, in.Facts, in.Project, true, "destroy", "already gone from the hosts; only forgotten")
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
func Unreached(facts *observe.Facts, work map[string]*Work) []Unreach {
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
// from what the state remembers of them, as DestroyWork does.
func (p *planner) removed() {
	if p.in.State == nil {
		return
	}
	d := newDoomed()
	for _, addr := range p.in.State.Addresses() {
		if configHas(p.cfg, addr) {
			continue
		}
		r, _ := p.in.State.Get(addr)
		d.fromState(addr, r)
	}
	// Even a resource already gone is forgotten by apply.
	const why = "not in the configuration any more"
	d.plan(p.res, p.facts, p.in.Project, false, why, why)
}

// OrderDestroy adds to g the order in which the resources of work that g
// holds are destroyed: a resource goes only after those in its
// Work.DestroyAfter (a ray_cluster's containers after the vllm_serves that
// ran on it have stopped). It is the one destroy order, of rayform destroy
// (DestroyWork) and of the resources an apply removes.
func OrderDestroy(g *dag.Graph, work map[string]*Work) {
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
}

// doomed collects the resources a plan destroys and what is known of each.
type doomed struct {
	clusters     map[string]string   // cluster address → container name
	clusterHosts map[string][]string // cluster address → nodes
	serves       map[string]*ServeWork
	serveHosts   map[string][]string
	serveCluster map[string]string // serve address → its cluster's address
}

func newDoomed() *doomed {
	return &doomed{clusters: map[string]string{}, clusterHosts: map[string][]string{}, serves: map[string]*ServeWork{},
		serveHosts: map[string][]string{}, serveCluster: map[string]string{}}
}

// fromConfig adds every ray_cluster and vllm_serve of cfg.
func (d *doomed) fromConfig(cfg *Config) {
	for _, rc := range sortedClusters(cfg) {
		d.clusters[rc.Addr] = ContainerName(rc)
		d.clusterHosts[rc.Addr] = rc.Nodes()
	}
	for _, sv := range sortedServes(cfg) {
		rc := cfg.RayClusters[sv.Cluster]
		if rc == nil {
			continue
		}
		d.serves[sv.Addr] = &ServeWork{Spec: ServeSpec{Resource: sv.Addr, Name: sv.Name, Container: ContainerName(rc), Node: rc.Head, Port: sv.Port}}
		d.serveHosts[sv.Addr] = []string{rc.Head}
		d.serveCluster[sv.Addr] = rc.Addr
	}
}

// fromState adds the state's resource addr unless it is known already
// (the configuration says more of it).
func (d *doomed) fromState(addr string, r state.Resource) {
	pa := plan.ParseAddress(addr)
	switch pa.Type {
	case "ray_cluster":
		if _, ok := d.clusters[addr]; !ok {
			d.clusters[addr] = r.Container
			d.clusterHosts[addr] = stateNodes(r.Hosts)
		}
	case "vllm_serve":
		if _, ok := d.serves[addr]; !ok {
			d.serves[addr] = &ServeWork{Spec: ServeSpec{Resource: addr, Name: pa.Instance(), Container: r.Container, Node: firstHost(r.Hosts)}}
			d.serveHosts[addr] = stateNodes(r.Hosts)
		}
	}
}

// plan adds the work and the change of each doomed resource to res: a
// cluster's removals are the containers of project labelled with its
// address that facts report on any host; a serve is stopped where its
// process runs. With adopt, a container of project labelled with an
// address not doomed yet is doomed too (rayform destroy leaves nothing of
// the project). A resource with nothing on the hosts is a no-op, its
// change saying gone instead of present.
func (d *doomed) plan(res *Result, facts *observe.Facts, project string, adopt bool, present, gone string) {
	if facts == nil {
		facts = &observe.Facts{Hosts: map[string]*observe.HostFacts{}}
	}
	refuseForeignServes(res, d.serves, facts, project)
	found := map[string][]Removal{}
	for _, node := range slices.Sorted(maps.Keys(facts.Hosts)) {
		hf := facts.Hosts[node]
		if hf == nil {
			continue
		}
		for _, c := range hf.Containers.List {
			if c.Labels[LabelManaged] != "true" || c.Labels[LabelProject] != project {
				continue
			}
			addr := c.Labels[LabelResource]
			if !strings.HasPrefix(addr, "ray_cluster.") {
				continue
			}
			if _, ok := d.clusters[addr]; !ok {
				if !adopt {
					continue
				}
				d.clusters[addr] = c.Name
			}
			found[addr] = append(found[addr], Removal{Node: node, Container: c.Name})
		}
	}
	// A serve of the state runs on the cluster whose container it names.
	for addr, sw := range d.serves {
		if d.serveCluster[addr] != "" {
			continue
		}
		for caddr, name := range d.clusters {
			if name == sw.Spec.Container {
				d.serveCluster[addr] = caddr
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(d.clusters)) {
		rems := found[addr]
		sort.Slice(rems, func(i, j int) bool { return rems[i].Node < rems[j].Node })
		hosts := d.clusterHosts[addr]
		for _, rm := range rems {
			hosts = appendUnique(hosts, rm.Node)
		}
		// Serves stop first: those on this cluster, and those whose
		// cluster is unknown.
		var after []string
		for _, saddr := range slices.Sorted(maps.Keys(d.serves)) {
			if c := d.serveCluster[saddr]; c == addr || c == "" {
				after = append(after, saddr)
			}
		}
		name := plan.ParseAddress(addr).Instance()
		w := &Work{Address: addr, Type: "ray_cluster", Hosts: hosts, DestroyAfter: after,
			Cluster: &ClusterWork{Name: name, Start: map[string]bool{}, Remove: rems}}
		addDestroy(res, w, name, len(rems) > 0, present, gone)
	}
	for _, addr := range slices.Sorted(maps.Keys(d.serves)) {
		sw := d.serves[addr]
		running := false
		if hf := facts.Hosts[sw.Spec.Node]; hf != nil {
			rec := ServeRecord(hf, sw.Spec.Name)
			running = rec.Found && rec.Alive
		}
		sw.Stop = true
		w := &Work{Address: addr, Type: "vllm_serve", Hosts: d.serveHosts[addr], Serve: sw}
		addDestroy(res, w, sw.Spec.Name, running, present, gone)
	}
}

// addDestroy records w, a delete where something is on the hosts and a no-op
// otherwise, and its change: the hosts it leaves.
func addDestroy(res *Result, w *Work, name string, onHosts bool, present, gone string) {
	w.Action = plan.Delete
	reason := present
	if !onHosts {
		w.Action, reason = plan.NoOp, gone
	}
	res.Work[w.Address] = w
	res.Plan.Changes = append(res.Plan.Changes, plan.ResourceChange{Address: w.Address, Type: w.Type, Name: name, Action: w.Action, Hosts: w.Hosts,
		Reasons: []string{reason},
		Attrs:   []plan.AttrChange{{Name: "hosts", Before: listOrEmpty(stringVals(w.Hosts)), After: cty.NullVal(cty.List(cty.String))}}})
}

func stateNodes(hs []state.Host) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Node)
	}
	return out
}
