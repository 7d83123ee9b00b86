package command

import (
	"context"
	"errors"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/run"
)

// runApply makes the hosts match the configuration (or a saved plan).
func runApply(ctx context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseApply, args)
	if !ok {
		return code
	}
	var saved *planfile.File
	if a.PlanPath != "" {
		f, err := planfile.Read(a.PlanPath)
		if err != nil {
			m.View.Error(err)
			return ExitError
		}
		saved = f
		if len(a.Targets) > 0 || len(a.Replace) > 0 || a.RotateToken {
			m.View.Error(errors.New("-target, -replace and -rotate-token cannot be given with a saved plan: the plan already records its own"))
			return ExitError
		}
		a.Targets = append(a.Targets, f.Targets...)
		a.Replace = append(a.Replace, f.Replace...)
	}
	s, code := openSession(m, m.View, a.Run, false)
	if s == nil {
		return code
	}
	defer s.close()
	s.run.Options.NotAtomic = a.NotAtomic
	return s.apply(ctx, run.ApplyRequest{AutoApprove: a.AutoApprove || saved != nil, Saved: saved, Destroy: saved != nil && saved.Destroy})
}

// apply runs the engine's apply (or destroy) and renders it.
func (s *session) apply(ctx context.Context, req run.ApplyRequest) int {
	req.OnInterrupt = s.m.SetInterruptHandler
	view := views.NewApply(s.opts.ViewType, s.m.View, views.ApplyOptions{
		Destroy: req.Destroy, Targeted: len(s.opts.Targets) > 0, LockTimeout: s.opts.LockTimeout,
		Stdin: s.m.Stdin, Version: s.m.version, Cost: s.costSummary,
	})
	if err := s.run.Apply(ctx, req, view); err != nil {
		return ExitError
	}
	return ExitOK
}
