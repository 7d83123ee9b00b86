package run

import (
	"sort"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
)

// PresentResources reads from in.Facts which of the project's resources
// exist on the hosts: every container with the project's labels (in any
// state: an exited container still belongs to its resource), and every
// serve of the configuration or the state whose process runs. Unknown
// reports the nodes whose containers could not be read: what they hold is
// unknown, not absent.
func PresentResources(kinds kind.Registry, in PlanInput) (present map[string]Present, unknown map[string]bool) {
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
	pr := &kind.Presence{Config: in.Config, State: in.State, Facts: facts, Project: in.Project, Known: known, Add: add,
		Head: func(addr, node string) {
			p := present[addr]
			p.Head = node
			present[addr] = p
		}}
	for _, k := range kind.With[kind.KindWithPresence](kinds) {
		k.Present(pr)
	}
	return present, unknown
}
