package serve

import (
	"context"
	"fmt"

	"github.com/rayform/rayform/resources/stepenv"
)

// forgetStep removes the serve's record and pid (and an older version's
// env file) so that nothing claims the process any more (they live in the
// host directory the head container mounts, see ServeHostDir; the lock file
// stays, as in start).
type forgetStep struct{ r *serveRun }

func newForgetStep(r *serveRun) *forgetStep { return &forgetStep{r: r} }

// Name names the serve and its head.
func (s *forgetStep) Name() string {
	return fmt.Sprintf("remove the record of vllm serve %s on %s", s.r.spec.Name, s.r.node())
}

// Check always removes: rm -f is as cheap as asking first.
func (s *forgetStep) Check(context.Context) (bool, error) { return false, nil }

// Run removes the files; a head container that is gone took them along.
func (s *forgetStep) Run(ctx context.Context, _ func(string)) error {
	r := s.r
	_, err := r.e.Mutate(ctx, r.node(), "docker", "exec", r.spec.Container, "rm", "-f", r.spec.specPath(), r.spec.pidPath(), r.spec.envPath())
	if err != nil && !stepenv.IsNoSuch(err) {
		return fmt.Errorf("removing the record of vllm serve %s on %s: %w", r.spec.Name, r.node(), err)
	}
	return nil
}

// Verify has nothing to read back.
func (s *forgetStep) Verify(context.Context) error { return nil }
