package command

import (
	"context"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
)

// runValidate checks the configuration, without its secrets.
func runValidate(_ context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseValidate, args)
	if !ok {
		return code
	}
	view := views.NewValidate(a.ViewType, m.View)
	cfg, diags := loadConfigChecking(m, &a.Vars)
	if err := view.Show(cfg.Files, diags); err != nil {
		view.Error(err)
		return ExitError
	}
	if diags.HasErrors() {
		return ExitError
	}
	return ExitOK
}
