package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/rayform/rayform/resources/stepenv"
)

// awaitStep sees a running serve still starting through to ready: it
// follows its log (from its start, so the progress so far is shown) until
// vLLM is up or ready_timeout runs out, then checks /health and
// /v1/models.
type awaitStep struct {
	r *serveRun
	// l is how the start ended, for the diagnosis.
	l launch
}

func newAwaitStep(r *serveRun) *awaitStep { return &awaitStep{r: r} }

// Name names the serve, its head and how long it may take.
func (s *awaitStep) Name() string {
	return fmt.Sprintf("wait for vllm serve %s on %s to be ready (ready_timeout %s)", s.r.spec.Name, s.r.node(), s.r.readyTimeoutValue())
}

// Check always waits: apply runs it only for a serve that does not answer.
func (s *awaitStep) Check(context.Context) (bool, error) { return false, nil }

// Run follows the log to ready.
func (s *awaitStep) Run(ctx context.Context, progress func(string)) error {
	return s.r.follow(ctx, &s.l, progress)
}

// Verify checks /health and /v1/models.
func (s *awaitStep) Verify(ctx context.Context) error { return s.r.verifyHTTP(ctx) }

// readyTimeoutValue is the serve's ready_timeout, or the default.
func (r *serveRun) readyTimeoutValue() time.Duration {
	if r.s.ReadyTimeout > 0 {
		return r.s.ReadyTimeout
	}
	return stepenv.DefaultServeTimeout
}
