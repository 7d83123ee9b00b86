package resources

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
)

// Present is what the observed hosts show of one resource of the project.
type Present struct {
	Type string
	// Nodes are the nodes holding one of its containers (a ray_cluster) or
	// running it (a vllm_serve), sorted.
	Nodes []string
	// Container is its container's name (a vllm_serve's is its cluster's
	// head container).
	Container string
	// Head is the node of a ray_cluster's head container ("" if none was
	// seen).
	Head string
}

// PresentResources reads from in.Facts which of the project's resources
// exist on the hosts: every container with the project's labels (in any
// state: an exited container still belongs to its resource), and every
// serve of the configuration or the state whose process runs. Unknown
// reports the nodes whose containers could not be read: what they hold is
// unknown, not absent.
func PresentResources(in PlanInput) (present map[string]Present, unknown map[string]bool) {
	present, unknown = map[string]Present{}, map[string]bool{}
	facts := in.Facts
	if facts == nil {
		facts = &observe.Facts{}
	}
	known := func(node string) (*observe.HostFacts, bool) {
		hf := facts.Hosts[node]
		if hf == nil || hf.Err != "" || facts.Errors[node] != nil || hf.Containers.Err != "" {
			unknown[node] = true
			return nil, false
		}
		return hf, true
	}
	add := func(addr, typ, node, container string) {
		p := present[addr]
		p.Type = typ
		if p.Container == "" {
			p.Container = container
		}
		for _, n := range p.Nodes {
			if n == node {
				return
			}
		}
		p.Nodes = append(p.Nodes, node)
		sort.Strings(p.Nodes)
		present[addr] = p
	}
	for _, node := range slices.Sorted(maps.Keys(facts.Hosts)) {
		hf, ok := known(node)
		if !ok {
			continue
		}
		for _, c := range hf.Containers.List {
			addr := c.Labels[LabelResource]
			if c.Labels[LabelManaged] != "true" || c.Labels[LabelProject] != in.Project || !strings.HasPrefix(addr, "ray_cluster.") {
				continue
			}
			add(addr, "ray_cluster", node, c.Name)
			if c.Labels[LabelRole] == "head" {
				p := present[addr]
				p.Head = node
				present[addr] = p
			}
		}
	}
	// Serves are found where the configuration or the state says they run.
	type serveAt struct{ name, node, container string }
	serves := map[string]serveAt{}
	if in.State != nil {
		for _, addr := range in.State.Addresses() {
			r, _ := in.State.Get(addr)
			if a := plan.ParseAddress(addr); a.Type == "vllm_serve" && len(r.Hosts) > 0 {
				serves[addr] = serveAt{a.Instance(), r.Hosts[0].Node, r.Container}
			}
		}
	}
	if in.Config != nil {
		for _, sv := range sortedServes(in.Config) {
			if rc := in.Config.RayClusters[sv.Cluster]; rc != nil {
				serves[sv.Addr] = serveAt{sv.Name, rc.Head, ContainerName(rc)}
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(serves)) {
		s := serves[addr]
		if _, ok := facts.Hosts[s.node]; !ok {
			unknown[s.node] = true
			continue
		}
		hf, ok := known(s.node)
		if !ok {
			continue
		}
		if rec := ServeRecord(hf, s.name); rec.Found && rec.Alive && (rec.Resource == "" || rec.Resource == addr) {
			add(addr, "vllm_serve", s.node, s.container)
		}
	}
	return present, unknown
}

// StartingServes returns, for each vllm_serve of in's configuration that
// the hosts show running as declared but not answering yet (plan's "vLLM
// is still starting": the process runs, its port is closed), the work of
// waiting for it to be ready (AwaitSteps). Apply runs it whether or not it
// changed anything, so that it reports success only for serves that serve.
func StartingServes(in PlanInput) []*Work {
	if in.Config == nil || in.Facts == nil {
		return nil
	}
	var out []*Work
	for _, sv := range sortedServes(in.Config) {
		rc := in.Config.RayClusters[sv.Cluster]
		if rc == nil {
			continue
		}
		head := in.Facts.Hosts[rc.Head]
		if head == nil || head.Err != "" {
			continue
		}
		spec, err := ServeSpecFor(in.Config, sv)
		if err != nil {
			continue
		}
		rec := ServeRecord(head, sv.Name)
		if !serveCurrent(spec, rec.SpecHash) || JudgeServe(rec, ServeAnswer(head, sv.Port), spec).State != HealthStarting {
			continue
		}
		out = append(out, &Work{Address: sv.Addr, Type: "vllm_serve", Action: plan.NoOp, Hosts: []string{rc.Head},
			Serve: &ServeWork{Spec: spec, ReadyTimeout: sv.ReadyTimeout}})
	}
	return out
}
