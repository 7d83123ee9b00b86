package resources

import (
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
// The graph orders the walk in reverse of creation: a ray_cluster depends
// on the vllm_serves that run on it, so the serves stop first. in.Facts
// must come from ObserveSpec(in.Config, in.State, in.Project).
func DestroyWork(in PlanInput) (*Result, *dag.Graph) {
	res := &Result{Plan: &plan.Plan{}, Work: map[string]*Work{}}
	g := dag.New()
	facts := in.Facts
	if facts == nil {
		facts = &observe.Facts{Hosts: map[string]*observe.HostFacts{}}
	}
	cfg := in.Config
	clusters := map[string]string{} // cluster address → container name
	var clusterHosts = map[string][]string{}
	if cfg != nil {
		for _, rc := range sortedClusters(cfg) {
			clusters[rc.Addr] = ContainerName(rc)
			clusterHosts[rc.Addr] = rc.Nodes()
		}
	}
	serves := map[string]*ServeWork{} // serve address → work
	serveCluster := map[string]string{}
	if cfg != nil {
		for _, sv := range sortedServes(cfg) {
			rc := cfg.RayClusters[sv.Cluster]
			if rc == nil {
				continue
			}
			serves[sv.Addr] = &ServeWork{Spec: ServeSpec{Resource: sv.Addr, Name: sv.Name, Container: ContainerName(rc), Node: rc.Head, Port: sv.Port}}
			serveCluster[sv.Addr] = rc.Addr
		}
	}
	var st *state.State = in.State
	if st != nil {
		for _, addr := range st.Addresses() {
			r, _ := st.Get(addr)
			pa := plan.ParseAddress(addr)
			typ, name := pa.Type, pa.Instance()
			switch typ {
			case "ray_cluster":
				if _, ok := clusters[addr]; !ok {
					clusters[addr] = r.Container
					clusterHosts[addr] = stateNodes(r.Hosts)
				}
			case "vllm_serve":
				if _, ok := serves[addr]; !ok {
					serves[addr] = &ServeWork{Spec: ServeSpec{Resource: addr, Name: name, Container: r.Container, Node: firstHost(r.Hosts)}}
				}
			}
		}
	}
	// Containers of this project the hosts report, by resource address.
	found := map[string][]Removal{}
	for _, node := range slices.Sorted(maps.Keys(facts.Hosts)) {
		hf := facts.Hosts[node]
		if hf == nil {
			continue
		}
		for _, c := range hf.Containers.List {
			if c.Labels[LabelManaged] != "true" || c.Labels[LabelProject] != in.Project {
				continue
			}
			addr := c.Labels[LabelResource]
			if !strings.HasPrefix(addr, "ray_cluster.") {
				continue
			}
			found[addr] = append(found[addr], Removal{Node: node, Container: c.Name})
			if _, ok := clusters[addr]; !ok {
				clusters[addr] = c.Name
			}
		}
	}
	// Serves in the state whose cluster is known by container name.
	for addr, sw := range serves {
		if serveCluster[addr] != "" {
			continue
		}
		for caddr, name := range clusters {
			if name == sw.Spec.Container {
				serveCluster[addr] = caddr
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(clusters)) {
		g.Add(addr)
		rems := found[addr]
		sort.Slice(rems, func(i, j int) bool { return rems[i].Node < rems[j].Node })
		hosts := clusterHosts[addr]
		for _, rm := range rems {
			hosts = appendUnique(hosts, rm.Node)
		}
		action := plan.Delete
		if len(rems) == 0 {
			action = plan.NoOp
		}
		name := plan.ParseAddress(addr).Instance()
		res.Work[addr] = &Work{Address: addr, Type: "ray_cluster", Action: action, Hosts: hosts,
			Cluster: &ClusterWork{Name: name, Start: map[string]bool{}, Remove: rems}}
		res.Plan.Changes = append(res.Plan.Changes, destroyChange(addr, "ray_cluster", name, action, hosts, len(rems) > 0))
	}
	for _, addr := range slices.Sorted(maps.Keys(serves)) {
		g.Add(addr)
		sw := serves[addr]
		if c := serveCluster[addr]; c != "" {
			g.Connect(c, addr)
		}
		running := false
		if hf := facts.Hosts[sw.Spec.Node]; hf != nil {
			rec := hf.Serves[sw.Spec.Name]
			running = rec.Found && rec.Alive
		}
		action := plan.Delete
		if !running {
			action = plan.NoOp
		}
		sw.Stop = true
		hosts := []string{sw.Spec.Node}
		res.Work[addr] = &Work{Address: addr, Type: "vllm_serve", Action: action, Hosts: hosts, Serve: sw}
		res.Plan.Changes = append(res.Plan.Changes, destroyChange(addr, "vllm_serve", sw.Spec.Name, action, hosts, running))
	}
	res.Plan.SortChanges()
	return res, g
}

func destroyChange(addr, typ, name string, action plan.Action, hosts []string, present bool) plan.ResourceChange {
	reason := "destroy"
	if !present {
		reason = "already gone from the hosts; only forgotten"
	}
	return plan.ResourceChange{Address: addr, Type: typ, Name: name, Action: action, Hosts: hosts, Reasons: []string{reason},
		Attrs: []plan.AttrChange{{Name: "hosts", Before: listOrEmpty(stringVals(hosts)), After: cty.NullVal(cty.List(cty.String))}}}
}

func stateNodes(hs []state.Host) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Node)
	}
	return out
}
