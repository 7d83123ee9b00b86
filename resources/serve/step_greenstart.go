package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/rayform/rayform/engine/transport/shell"
)

// greenStartStep starts the new generation on a free loopback port beside
// the running serve and proves it (/health, /v1/models); one that fails is
// stopped and recorded as a failed start, and the old one keeps serving.
type greenStartStep struct{ g *greenRun }

// Name names the serve and its head.
func (s *greenStartStep) Name() string {
	return fmt.Sprintf("start the new vllm serve %s beside the running one on %s (blue/green, on a loopback port)", s.g.r.spec.Name, s.g.r.node())
}

// Check always starts: the plan decided that the serve must be replaced.
func (s *greenStartStep) Check(context.Context) (bool, error) { return false, nil }

// Run starts the new generation and waits for its answer.
func (s *greenStartStep) Run(ctx context.Context, progress func(string)) error {
	g := s.g
	r := g.r
	// A new generation an interrupted replacement left holds GPUs.
	if _, err := r.exec(ctx, "true; "+nextStopScript(r.spec), true); err != nil {
		return fmt.Errorf("stopping a leftover new generation of vllm serve %s on %s: %w", r.spec.Name, r.node(), err)
	}
	port, python, err := r.loopbackPort(ctx)
	if err != nil {
		return err
	}
	if !python {
		// No python3 in the image for the front (every vLLM image has
		// it; the lab's simnode-only images do not).
		g.stopStart = true
		progress("the head container has no python3 for the serve's front: stop-then-start instead")
		if err := newStopStep(r).Run(ctx, progress); err != nil {
			return err
		}
		if err := (stopFrontStep{r}).Run(ctx, progress); err != nil {
			return err
		}
		return newStartStep(r).Run(ctx, progress)
	}
	g.next = &serveRun{e: r.e, w: r.w, s: r.s, spec: r.spec.nextSpec(port)}
	progress(fmt.Sprintf("the new serve listens on 127.0.0.1:%d until the switch", port))
	began := r.e.Now()
	err = g.next.start(ctx, &g.l, progress)
	if err == nil {
		err = g.next.verifyHTTP(ctx)
	}
	if err != nil {
		// The old one never stopped: it still serves. The new one's log
		// becomes the serve's previous one (logs -previous).
		keep := fmt.Sprintf("; mv -f %s %s", shell.Quote(g.next.spec.LogPath()), shell.Quote(r.spec.PreviousLogPath()))
		_, _ = r.exec(context.WithoutCancel(ctx), nextStopScript(r.spec)+keep, true)
		if ctx.Err() == nil {
			r.markFailed(ctx, g.l, FailedStart{SpecHash: r.spec.Hash(), Cause: causeOf(err), At: r.e.Now().UTC().Truncate(time.Second), Restored: true})
		}
		return fmt.Errorf("%w\n\nThe new serve was stopped (`rayform logs -previous %s` shows its log); vllm serve %s keeps serving as before (blue/green: no downtime).", err, r.w.Address, r.spec.Name)
	}
	g.loaded = r.e.Now().Sub(began)
	return nil
}

// Verify has nothing more to read back: Run waited for the answer.
func (s *greenStartStep) Verify(context.Context) error { return nil }
