package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/rayform/rayform/resources/stepenv"
)

// verifyStep reads Ray's node table until exactly the declared nodes are
// ALIVE, each under its fabric address with its GPUs. It only verifies.
type verifyStep struct{ r *clusterRun }

func newVerifyStep(r *clusterRun) *verifyStep { return &verifyStep{r: r} }

// Name names the head, where the table is read.
func (s *verifyStep) Name() string { return "verify Ray's node table on " + s.r.head.Node }

// Check always goes on to the verification.
func (s *verifyStep) Check(context.Context) (bool, error) { return false, nil }

// Run has nothing to do.
func (s *verifyStep) Run(context.Context, func(string)) error { return nil }

// Verify polls the table (verifyTable).
func (s *verifyStep) Verify(ctx context.Context) error { return s.r.verifyTable(ctx) }

func (r *clusterRun) verifyTable(ctx context.Context) error {
	var last []string
	lastErr := ""
	err := r.e.PollUntil(ctx, r.e.RayReadyTimeout, func(ctx context.Context) (bool, error) {
		rows, err := r.rayNodes(ctx)
		if err != nil {
			if stepenv.IsNoSuch(err) {
				return false, fmt.Errorf("the ray head container %s on %s is not running: %w", r.head.Name, r.head.Node, err)
			}
			lastErr = err.Error()
			return false, nil
		}
		lastErr = ""
		last = reasons(judgeRayTable(r.c.Specs, rows))
		if len(last) == 0 {
			return true, nil
		}
		// A started worker missing from the table may have exited: fail now.
		alive := map[string]bool{}
		for _, n := range rows {
			if n.State == "ALIVE" {
				alive[n.NodeIP] = true
			}
		}
		for _, node := range r.started {
			s := r.spec[node]
			if node == r.head.Node || s.NodeIP == "" || alive[s.NodeIP] {
				continue
			}
			if err := containerRunning(ctx, r.e, node, s.Name); err != nil {
				return false, err
			}
		}
		return false, nil
	})
	if errors.Is(err, stepenv.ErrTimedOut) {
		msg := fmt.Sprintf("Ray's node table on %s does not match the declaration after %s:", r.head.Node, r.e.RayReadyTimeout)
		for _, d := range last {
			msg += "\n  - " + d
		}
		if lastErr != "" {
			msg += "\n  - ray list nodes: " + lastErr
		}
		err = errors.New(msg)
	}
	if err != nil {
		return r.diagnose(ctx, err)
	}
	return nil
}
