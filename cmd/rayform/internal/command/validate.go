package command

import (
	"context"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
)

// runValidate checks the configuration, without its secrets.
func runValidate(_ context.Context, m *Meta, args []string) int {
	a, perr := arguments.ParseValidate(args)
	m.common(a.Common)
	if perr != nil {
		return m.View.ParseError(perr)
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
	a, perr := arguments.ParseGraph(args)
	m.common(a.Common)
	if perr != nil {
		return m.View.ParseError(perr)
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
	a, perr := arguments.ParseVersion(args)
	m.common(a.Common)
	if perr != nil {
		return m.View.ParseError(perr)
	}
	views.NewVersion(m.View).Version(m.version)
	return ExitOK
}
