package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/stepenv"
)

// rayStep checks that the image has a ray executable, in a throwaway
// container labelled as rayform's. It has nothing to check first and
// nothing to read back: the answer is the run's.
type rayStep struct {
	r     *clusterRun
	nodes []string
}

func newRayStep(r *clusterRun, nodes []string) *rayStep { return &rayStep{r: r, nodes: nodes} }

// Name names the head's image and the nodes.
func (s *rayStep) Name() string {
	return fmt.Sprintf("check that %s has ray on %s", s.r.head.Image, stepenv.DescribeNodes(s.nodes))
}

// Check always runs the check.
func (s *rayStep) Check(context.Context) (bool, error) { return false, nil }

// Run looks for ray in each node's image, in parallel.
func (s *rayStep) Run(ctx context.Context, _ func(string)) error {
	return s.r.e.ForEach(ctx, s.nodes, func(ctx context.Context, node string) error {
		return checkRay(ctx, s.r.e, node, s.r.spec[node].Image, s.r.dctx())
	})
}

// Verify has nothing to read back.
func (s *rayStep) Verify(context.Context) error { return nil }

// checkRay runs `command -v ray` in image on node.
func checkRay(ctx context.Context, e *stepenv.StepEnv, node, image string, dctx diagnose.Context) error {
	res, err := e.Mutate(ctx, node, "docker", "run", "--rm",
		"--label", LabelManaged+"=true", "--label", LabelProject+"="+e.Project,
		"--entrypoint", "sh", image, "-c", "command -v ray")
	if err == nil && strings.TrimSpace(string(res.Stdout)) != "" {
		return nil
	}
	code := stepenv.ExitCode(err)
	if err == nil || ((code == 1 || code == 127) && !strings.Contains(string(res.Stderr), "docker:") &&
		!strings.Contains(string(res.Stderr), "Error response from daemon")) {
		return rayMissingError(node, image, dctx.Cluster)
	}
	if code < 0 {
		return fmt.Errorf("checking for ray in %s on %s: %w", image, node, err)
	}
	text := append(append([]byte(nil), res.Stdout...), res.Stderr...)
	return stepenv.Diagnosed(fmt.Errorf("checking for ray in %s on %s: %w", image, node, err),
		[]diagnose.Log{{Host: node, Source: "docker run " + image, Text: text}}, dctx)
}

// rayMissingError says that the image has no ray, and how to get one.
func rayMissingError(node, image, cluster string) error {
	return fmt.Errorf("Ray missing from the image %s (on %s): `command -v ray` finds no ray executable, so `ray start` cannot run in it. "+
		"Recent vLLM images no longer ship Ray.\n"+
		"Fix: use an image that ships Ray, or extend this one and set image on %s to the result (the same image on every node):\n"+
		"  FROM %s\n  RUN pip install 'ray[default]'", image, node, cluster, image)
}
