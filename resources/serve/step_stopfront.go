package serve

import (
	"context"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/stepenv"
)

// stopFrontStep stops the serve's front (and a next generation an
// interrupted blue/green replacement left): after a stop that is not a
// blue/green switch, the serve's port must be free for the serve itself.
type stopFrontStep struct{ r *serveRun }

// Name is the step's line.
func (s stopFrontStep) Name() string {
	return fmt.Sprintf("stop the front of vllm serve %s on %s, if any", s.r.spec.Name, s.r.node())
}

// Check is true when there is nothing to stop.
func (s stopFrontStep) Check(ctx context.Context) (bool, error) {
	next := s.r.spec.nextSpec(0)
	res, err := s.r.exec(ctx, fmt.Sprintf("if [ -f %s ] || [ -f %s ]; then echo some; else echo none; fi", shell.Quote(s.r.spec.frontPidPath()), shell.Quote(next.pidPath())), false)
	if err != nil {
		if stepenv.IsNoSuch(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading the front of vllm serve %s on %s: %w", s.r.spec.Name, s.r.node(), err)
	}
	return strings.TrimSpace(string(res.Stdout)) != "some", nil
}

// Run stops them.
func (s stopFrontStep) Run(ctx context.Context, progress func(string)) error {
	if _, err := s.r.exec(ctx, s.r.spec.stopFrontScript(), true); err != nil && !stepenv.IsNoSuch(err) {
		return fmt.Errorf("stopping the front of vllm serve %s on %s: %w", s.r.spec.Name, s.r.node(), err)
	}
	return nil
}

// Verify checks that nothing is left.
func (s stopFrontStep) Verify(ctx context.Context) error {
	done, err := s.Check(ctx)
	if err == nil && !done {
		err = fmt.Errorf("the front of vllm serve %s on %s still runs", s.r.spec.Name, s.r.node())
	}
	return err
}
