package command

import (
	"context"
	"errors"
	"time"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/run"
)

// runStatus prints one screen per cluster from one observation of the
// hosts (the plan's), plus one read of each serve's /metrics on its head.
func runStatus(ctx context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseStatus, args)
	if !ok {
		return code
	}
	if a.Watch > 0 && (a.ViewType == arguments.ViewJSON || !views.IsTerminal(m.View.Stdout())) {
		m.View.Error(errors.New("-watch refreshes a terminal; without one (or with -json), run status from a loop or cron"))
		return ExitError
	}
	s, code := openSession(m, m.View, a.Run, true)
	if s == nil {
		return code
	}
	defer s.close()
	view := views.NewStatus(a.ViewType, m.View, a.Watch > 0)
	for {
		rep, err := s.status(ctx)
		if err != nil {
			view.Error(err)
			return ExitError
		}
		if err := view.Show(rep); err != nil {
			view.Error(err)
			return ExitError
		}
		if a.Watch == 0 {
			if !rep.Healthy {
				return ExitUnhealthy
			}
			return ExitOK
		}
		select {
		case <-ctx.Done():
			return ExitOK
		case <-time.After(a.Watch):
		}
	}
}

// status observes the hosts once, with plan's probe plus what the kinds
// show in status (kind.Observation.Status: each serve's /metrics and start
// time), and builds the report (run.Status).
func (s *session) status(ctx context.Context) (*run.StatusReport, error) {
	s.statusProbes = true
	obs, err := s.observeAndPlan(ctx, false)
	if err != nil {
		return nil, err
	}
	return run.Status(s.run.Kinds, s.project, &run.Observation{Facts: obs.facts, Config: obs.cfg, Result: obs.result}), nil
}
