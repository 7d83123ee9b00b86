package serve

import (
	"context"
	"fmt"
	"strings"

	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/stepenv"
)

// dataplaneStep runs the data-plane check on the serve's cluster, after Ray
// is up and before vllm serve starts: a failure stops the apply with the
// classified cause; bandwidth far below the link speed is a warning.
type dataplaneStep struct{ r *serveRun }

func newDataplaneStep(r *serveRun) *dataplaneStep { return &dataplaneStep{r: r} }

// Name names the check's nodes.
func (s *dataplaneStep) Name() string {
	names := make([]string, len(s.r.s.Check))
	for i, n := range s.r.s.Check {
		names[i] = n.Name
	}
	return "data-plane check (torch c10d, Gloo, NCCL) on " + stepenv.DescribeNodes(names)
}

// Check always checks: the data plane is a fact of now.
func (s *dataplaneStep) Check(context.Context) (bool, error) { return false, nil }

// Run finishes the check whose ranks started with the containers and
// reports its table.
func (s *dataplaneStep) Run(ctx context.Context, progress func(string)) error {
	ns, err := stepenv.Connected(s.r.e.Conns, s.r.s.Check)
	if err != nil {
		return err
	}
	rep := dataplane.Finish(ctx, s.r.e.Checks.Take(s.r.w.Address, s.r.s.Check), ns, s.r.e.Dataplane)
	for _, line := range strings.Split(strings.TrimRight(rep.Table(), "\n"), "\n") {
		progress(line)
	}
	for _, p := range rep.Problems() {
		if p.Warning {
			progress("warning: " + p.Text)
		}
	}
	if rep.OK() {
		progress(fmt.Sprintf("data plane ok on %d nodes (rendezvous port %d; %s)", len(rep.Nodes), rep.Port, rep.Timing()))
		return nil
	}
	d := s.r.e.Diagnose
	if d.Serve == "" {
		d.Serve = s.r.w.Address
	}
	return CheckError(rep, d, "vllm serve "+s.r.spec.Name+" was not started")
}

// Verify has nothing to read back.
func (s *dataplaneStep) Verify(context.Context) error { return nil }
