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

// runVersion prints the rayform version.
func runVersion(_ context.Context, m *Meta, args []string) int {
	if _, code, ok := parse(m, arguments.ParseVersion, args); !ok {
		return code
	}
	views.NewVersion(m.View).Version(m.version)
	return ExitOK
}
