package arguments

import "github.com/rayform/rayform/engine/state"

// Show is rayform show's command line.
type Show struct {
	Common
	// ViewType is ViewJSON with -json.
	ViewType ViewType
	// StateFile is the local state file.
	StateFile string
	// PlanPath is the saved plan to show ("": the state).
	PlanPath string
}

// ParseShow parses rayform show's arguments.
func ParseShow(args []string) (*Show, *ParseError) {
	a := &Show{}
	p := newCommand("show", "show [options] [PLAN]\n\n  Print the saved plan PLAN (from plan -out) as plan showed it, or without PLAN\n  the resources the state records (where each was applied).", &a.Common)
	json := p.fs.Bool("json", false, "print the plan's -json events (NDJSON), or the state as JSON")
	p.fs.StringVar(&a.StateFile, "state", state.DefaultPath, "local state `FILE`, relative to the configuration directory")
	pos, err := p.parseInterspersed(args)
	a.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case len(pos) > 1:
		return a, p.errorf("show takes at most one argument, a saved plan (got %q)", pos)
	case len(pos) == 1:
		a.PlanPath = pos[0]
	}
	return a, nil
}
