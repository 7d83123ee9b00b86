package resources

import (
	"maps"
	"slices"
	"sort"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/kind"
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
	var cfg *config.Config
	if in.Config != nil {
		cfg = in.Config.Config
	}
	pr := &kind.Presence{Config: cfg, State: in.State, Facts: facts, Project: in.Project, Known: known, Add: add,
		Head: func(addr, node string) {
			p := present[addr]
			p.Head = node
			present[addr] = p
		}}
	for _, k := range Kinds() {
		k.Present(pr)
	}
	return present, unknown
}

// presentClusters finds the project's cluster containers on the hosts, in
// any state (an exited container still belongs to its cluster).
func presentClusters(pr *kind.Presence) {
	for _, node := range slices.Sorted(maps.Keys(pr.Facts.Hosts)) {
		hf, ok := pr.Known(node)
		if !ok {
			continue
		}
		for _, c := range hf.Containers.List {
			if !clusterContainerOf(c.Labels, pr.Project) {
				continue
			}
			addr := c.Labels[LabelResource]
			pr.Add(addr, KindCluster, node, c.Name)
			if c.Labels[LabelRole] == "head" {
				pr.Head(addr, node)
			}
		}
	}
}

// presentServes finds the serves whose process runs where the
// configuration or the state says they run.
func presentServes(pr *kind.Presence) {
	type serveAt struct{ name, node, container string }
	serves := map[string]serveAt{}
	if pr.State != nil {
		for _, addr := range pr.State.Addresses() {
			r, _ := pr.State.Get(addr)
			if a := plan.ParseAddress(addr); a.Type == KindServe && len(r.Hosts) > 0 {
				serves[addr] = serveAt{a.Instance(), r.Hosts[0].Node, r.Container}
			}
		}
	}
	if cfg := View(pr.Config); cfg != nil {
		for _, sv := range sortedServes(cfg) {
			if rc := cfg.RayClusters[sv.Cluster]; rc != nil {
				serves[sv.Addr] = serveAt{sv.Name, rc.Head, ContainerName(rc)}
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(serves)) {
		s := serves[addr]
		hf, ok := pr.Known(s.node)
		if !ok {
			continue
		}
		if rec := ServeRecord(hf, s.name); rec.Found && rec.Alive && (rec.Resource == "" || rec.Resource == addr) {
			pr.Add(addr, KindServe, s.node, s.container)
		}
	}
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
		out = append(out, &Work{Address: sv.Addr, Type: KindServe, Action: plan.NoOp, Hosts: []string{rc.Head},
			Do: &ServeWork{Spec: spec, ReadyTimeout: sv.ReadyTimeout}})
	}
	return out
}
