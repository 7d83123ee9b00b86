package command

import (
	"context"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
)

// runGraph prints the dependency graph in DOT.
func runGraph(_ context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseGraph, args)
	if !ok {
		return code
	}
	view := views.NewGraph(m.View)
	cfg, diags := loadConfigChecking(m, &a.Vars)
	view.Diagnostics(cfg.Files, diags)
	if diags.HasErrors() {
		return ExitError
	}
	view.DOT(cfg.Graph().DOT())
	return ExitOK
}
