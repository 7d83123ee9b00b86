package serve

import (
	"context"
	"errors"
	"fmt"
)

// switchStep points the serve's front at the new generation (starting
// the front, which takes the port from the old vLLM, for a serve started
// without one), stops the old generation, makes the new one the serve, and
// checks the endpoint.
type switchStep struct{ g *greenRun }

// Name names the serve and its head.
func (s *switchStep) Name() string {
	return fmt.Sprintf("switch the endpoint of vllm serve %s on %s to the new serve, then stop the old one (blue/green)", s.g.r.spec.Name, s.g.r.node())
}

// Check always switches: the new generation is started for it.
func (s *switchStep) Check(context.Context) (bool, error) { return false, nil }

// Run switches.
func (s *switchStep) Run(ctx context.Context, progress func(string)) error {
	g := s.g
	r := g.r
	if g.stopStart {
		return nil
	}
	if g.next == nil {
		return errors.New("no new generation started")
	}
	progress(fmt.Sprintf("switching the endpoint of vllm serve %s to the new serve on 127.0.0.1:%d", r.spec.Name, g.next.spec.Port))
	// New connections go to the new generation from here on. A serve
	// started without a front (before rayform started every serve behind
	// one, or on an image without python3) gets it here: it takes the port
	// over from the old vLLM (frontPy).
	if err := r.startFront(ctx, g.next.spec.Port, true, progress); err != nil {
		return err
	}
	// The old generation: its connections drain (vLLM's graceful
	// shutdown on SIGTERM finishes the requests it has).
	if err := newStopStep(r).Run(ctx, progress); err != nil {
		return err
	}
	if _, err := r.exec(ctx, promoteScript(r.spec), true); err != nil {
		return fmt.Errorf("making the new vllm serve %s the serve on %s: %w", r.spec.Name, r.node(), err)
	}
	if err := r.verifyHTTP(ctx); err != nil {
		return fmt.Errorf("the endpoint of vllm serve %s after the switch: %w", r.spec.Name, err)
	}
	progress(fmt.Sprintf("switched %s to the new serve without downtime (blue/green; it loaded in %.0f s beside the old one)", r.spec.LocalURL(""), g.loaded.Seconds()))
	return r.keepGood(ctx, g.l.owner, g.loaded)
}

// Verify reads the endpoint's answer back.
func (s *switchStep) Verify(ctx context.Context) error { return s.g.r.verifyHTTP(ctx) }
