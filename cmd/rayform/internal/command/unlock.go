package command

import (
	"context"
	"fmt"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/run"
)

// runForceUnlock shows who holds a cluster's lock and, confirmed, frees
// it.
func runForceUnlock(ctx context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseUnlock, args)
	if !ok {
		return code
	}
	view := views.NewUnlock(m.View, m.Stdin)
	s, code := openSession(m, m.View, a.Run, false)
	if s == nil {
		return code
	}
	defer s.close()
	t, ok := s.run.FindLock(a.Resource)
	if !ok {
		view.Error(fmt.Errorf("no %q with a lock in the configuration", a.Resource))
		return ExitError
	}
	h, err := s.run.InspectLock(ctx, t)
	switch {
	case err != nil:
		view.Error(err)
		return ExitError
	case h.Legacy != nil:
		view.Legacy(t.Resource, h.Legacy, s.project, t.Key)
		return ExitError
	case h.Held == nil:
		view.NotLocked(t.Resource)
		return endOrphans(ctx, view, s, t)
	}
	view.Held(h.Held)
	if !a.Force && !view.Confirm(t.Resource) {
		return ExitError
	}
	if err := s.run.BreakLock(ctx, h); err != nil {
		view.Error(err)
		return ExitError
	}
	view.Released(t.Resource)
	return endOrphans(ctx, view, s, t)
}

// endOrphans ends, on every host, what an earlier run left running under
// t's fence (run.Runner.EndOrphans), saying what it ended where. That it
// cannot is a warning: the lock is free, and the next run fences the
// hosts.
func endOrphans(ctx context.Context, view *views.Unlock, s *session, t run.LockTarget) int {
	if err := s.run.EndOrphans(ctx, t, view.OrphansEnded); err != nil {
		view.Warning(err)
	}
	return ExitOK
}
