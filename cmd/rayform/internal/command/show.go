package command

import (
	"context"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/state"
)

// runShow prints a saved plan as plan printed it (text, or its -json
// events), or, without a file, what the state records.
func runShow(_ context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseShow, args)
	if !ok {
		return code
	}
	view := views.NewShow(a.ViewType, m.View)
	if a.PlanPath == "" {
		st, err := state.Load(m.statePath(a.StateFile))
		if err == nil {
			err = view.State(st)
		}
		if err != nil {
			view.Error(err)
			return ExitError
		}
		return ExitOK
	}
	f, err := planfile.Read(a.PlanPath)
	if err == nil {
		err = view.Plan(a.PlanPath, f)
	}
	if err != nil {
		view.Error(err)
		return ExitError
	}
	return ExitOK
}
