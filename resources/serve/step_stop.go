package serve

import (
	"context"
	"errors"
	"fmt"

	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/stepenv"
)

// stopStep stops a running serve process: SIGTERM, wait, then SIGKILL. It
// notes when the serve went down in the work (ServeWork.stoppedAt), for a
// failed start's report of the outage.
type stopStep struct{ r *serveRun }

func newStopStep(r *serveRun) *stopStep { return &stopStep{r: r} }

// Name names the serve and its head.
func (s *stopStep) Name() string {
	return fmt.Sprintf("stop vllm serve %s on %s", s.r.spec.Name, s.r.node())
}

// Check is done when no serve process is alive.
func (s *stopStep) Check(ctx context.Context) (bool, error) {
	st, _, err := s.r.state(ctx)
	return st != "alive", err
}

// Run signals the process, SIGTERM then SIGKILL, until it is gone.
func (s *stopStep) Run(ctx context.Context, progress func(string)) error {
	if s.r.s.stoppedAt.IsZero() {
		s.r.s.stoppedAt = s.r.e.Now()
	}
	for _, sig := range []string{"TERM", "KILL"} {
		if stopped, err := s.signal(ctx, sig, progress); stopped || err != nil {
			return err
		}
	}
	return fmt.Errorf("vllm serve %s on %s does not exit, even after SIGKILL", s.r.spec.Name, s.r.node())
}

// signal sends sig and waits up to the stop timeout for the process to
// exit; stopped is false when it still runs.
func (s *stopStep) signal(ctx context.Context, sig string, progress func(string)) (stopped bool, err error) {
	r := s.r
	// SIGCONT after it: a stopped (hung) process only acts on SIGTERM
	// once continued.
	script := fmt.Sprintf(`kill -%s "$(cat %s)" 2>/dev/null; kill -CONT "$(cat %[2]s)" 2>/dev/null; true`, sig, shell.Quote(r.spec.pidPath()))
	if _, err := r.exec(ctx, script, true); err != nil {
		if stepenv.IsNoSuch(err) {
			return true, nil
		}
		return false, fmt.Errorf("signalling vllm serve %s on %s: %w", r.spec.Name, r.node(), err)
	}
	var pid string
	err = r.e.PollUntil(ctx, r.e.StopTimeout, func(ctx context.Context) (bool, error) {
		st, p, err := r.state(ctx)
		pid = p
		return st != "alive", err
	})
	if err == nil {
		progress(fmt.Sprintf("stopped vllm serve %s (SIG%s)", r.spec.Name, sig))
		return true, nil
	}
	if !errors.Is(err, stepenv.ErrTimedOut) {
		return false, err
	}
	progress(fmt.Sprintf("vllm serve %s (pid %s) still runs %s after SIG%s", r.spec.Name, pid, r.e.StopTimeout, sig))
	return false, nil
}

// Verify has nothing more to read back: Run waited for the exit.
func (s *stopStep) Verify(context.Context) error { return nil }
