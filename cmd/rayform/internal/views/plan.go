package views

import (
	"fmt"
	"time"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
)

// Plan shows a plan (plan's, and the one apply and destroy show before
// asking): for a person (PlanHuman) or as NDJSON events (PlanJSON).
type Plan interface {
	// Plan prints the observation's notes and plan; cost gives the
	// observation's SSH cost (costText), savedTo the file it is saved to.
	Plan(obs *run.Observation, cost func() string, savedTo string) error
	// NotConverged says that serves are still starting (plan
	// -detailed-exitcode exits 2 for them).
	NotConverged(addrs []string)
	Error(err error)
}

// NewPlan is the plan view vt chooses; version goes in the JSON events.
func NewPlan(vt arguments.ViewType, v *View, version string) Plan {
	if vt == arguments.ViewJSON {
		return &PlanJSON{View: v, version: version}
	}
	return &PlanHuman{View: v}
}

// PlanHuman prints the plan as text.
type PlanHuman struct{ *View }

// Plan prints the notes, the observation's cost and the plan.
func (v *PlanHuman) Plan(obs *run.Observation, cost func() string, savedTo string) error {
	p := obs.Result.Plan
	v.Notes(obs.Result.Notes)
	fmt.Fprintf(v.stdout, "Observed %d hosts in %s (%s).\n\n", len(obs.Facts.Hosts), obs.Elapsed.Round(10*time.Millisecond), cost())
	so := plan.TextOptions{Color: v.color}
	if savedTo != "" && len(p.Errors()) == 0 {
		so.SavedTo = savedTo
	}
	return plan.RenderText(v.stdout, p, so)
}

// NotConverged prints one line per serve still starting.
func (v *PlanHuman) NotConverged(addrs []string) {
	for _, a := range addrs {
		fmt.Fprintf(v.stdout, "\nNot converged yet: %s is still starting; apply would wait for it to answer (up to its ready_timeout).\n", a)
	}
}

// PlanJSON prints the plan as NDJSON events.
type PlanJSON struct {
	*View
	version string
}

// Plan prints the notes (on stderr) and the plan's events.
func (v *PlanJSON) Plan(obs *run.Observation, _ func() string, _ string) error {
	v.Notes(obs.Result.Notes)
	return plan.RenderJSON(v.stdout, obs.Result.Plan, plan.JSONOptions{Version: v.version})
}

// NotConverged prints nothing: the events say it.
func (v *PlanJSON) NotConverged([]string) {}

// CostText is the sentence of an observation's SSH cost: the connections
// made and the most round trips to one host.
func CostText(handshakes, maxRT int) string {
	return fmt.Sprintf("%d SSH %s, at most %d round %s per host", handshakes, plan.Plural(handshakes, "connection"), maxRT, plan.Plural(maxRT, "trip"))
}
