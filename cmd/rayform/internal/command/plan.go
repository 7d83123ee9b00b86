package command

import (
	"context"
	"fmt"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/run"
)

// runPlan observes the hosts and shows what apply would change.
func runPlan(ctx context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParsePlan, args)
	if !ok {
		return code
	}
	view := views.NewPlan(a.ViewType, m.View, m.version)
	s, code := openSession(m, m.View, a.Run, false)
	if s == nil {
		return code
	}
	defer s.close()
	// plan -destroy plans the removals only: it depends on nothing a plan
	// of the configuration's changes asks outside the hosts.
	var obs *run.Observation
	var err error
	if a.Destroy {
		obs, _, err = s.run.ObserveDestroy(ctx)
	} else {
		obs, err = s.run.Observe(ctx, a.RefreshOnly)
	}
	if err != nil {
		view.Error(err)
		return ExitError
	}
	p := obs.Result.Plan
	if err := view.Plan(obs, func() string { return s.costSummary(obs) }, a.Out); err != nil {
		view.Error(err)
		return ExitError
	}
	if a.Out != "" && len(p.Errors()) == 0 {
		if err := s.run.SavePlan(obs, a.Out, a.Destroy); err != nil {
			view.Error(fmt.Errorf("saving the plan: %w", err))
			return ExitError
		}
	}
	return planExit(s, a, obs, view)
}

// planExit is plan's exit status: 1 when the plan has errors; with
// -detailed-exitcode, 2 when it has changes or a serve is still starting.
func planExit(s *session, a *arguments.Plan, obs *run.Observation, view views.Plan) int {
	p := obs.Result.Plan
	switch {
	case len(p.Errors()) > 0:
		return ExitError
	case a.DetailedExitCode && p.HasChanges():
		return ExitChanges
	case a.DetailedExitCode && !a.Destroy && !a.RefreshOnly:
		// A serve still starting is not converged: apply would wait for
		// it, and fail if it does not answer within its ready_timeout.
		if starting := s.run.Starting(obs); len(starting) > 0 {
			addrs := make([]string, 0, len(starting))
			for _, w := range starting {
				addrs = append(addrs, w.Address)
			}
			view.NotConverged(addrs)
			return ExitChanges
		}
	}
	return ExitOK
}

// costSummary reports the SSH cost of the observation: connections and
// round trips per host.
func (s *session) costSummary(obs *run.Observation) string {
	maxRT, handshakes := 0, 0
	for h, n := range obs.Facts.RoundTrips {
		if n > maxRT {
			maxRT = n
		}
		if c, ok := s.conns[h]; ok {
			handshakes += c.Stats().Handshakes
		}
	}
	return views.CostText(handshakes, maxRT)
}
