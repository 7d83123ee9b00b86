package resources

import (
	"maps"
	"slices"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/kit"
)

// ExecLimits returns the execve limits each node reported (observe.Exec),
// the zero value (Linux's defaults) for a node that did not.
func ExecLimits(facts *observe.Facts) func(node string) observe.Exec {
	return func(node string) observe.Exec {
		if facts == nil {
			return observe.Exec{}
		}
		if h := facts.Hosts[node]; h != nil && h.Exec.Known() {
			return h.Exec
		}
		return observe.Exec{}
	}
}

// commandLimits adds an error finding for every resource whose start
// command its host's kernel would refuse (kit.CheckCommandLimits, which
// apply's prepare runs again): the plan says so before apply stops
// anything that runs.
func (p *planner) commandLimits() {
	for _, addr := range slices.Sorted(maps.Keys(p.res.Work)) {
		w := p.res.Work[addr]
		if w.Action == plan.NoOp || w.Action == plan.Delete {
			continue
		}
		if err := kit.CheckCommandLimits(w, p.in.Project, ExecLimits(p.facts)); err != nil {
			p.Finding(plan.Finding{Severity: plan.Error, Address: addr,
				Summary: "A command of this resource is too long for its host",
				Detail:  err.Error()})
		}
	}
}
