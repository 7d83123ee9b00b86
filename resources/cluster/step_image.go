package cluster

import (
	"context"
	"fmt"

	"github.com/rayform/rayform/resources/stepenv"
)

// imageStep makes the image present on every node, pulling where missing
// with docker's progress as progress lines.
type imageStep struct {
	r     *clusterRun
	nodes []string
	// missing are the nodes without the image; nil until checked.
	missing map[string]bool
}

func newImageStep(r *clusterRun, nodes []string) *imageStep {
	return &imageStep{r: r, nodes: nodes}
}

// Name names the head's image and the nodes.
func (s *imageStep) Name() string {
	return fmt.Sprintf("image %s on %s", s.r.head.Image, stepenv.DescribeNodes(s.nodes))
}

// Check is done when every node has its image.
func (s *imageStep) Check(ctx context.Context) (bool, error) {
	if err := s.findMissing(ctx); err != nil {
		return false, err
	}
	return len(s.missing) == 0, nil
}

// findMissing asks every node for its image into s.missing.
func (s *imageStep) findMissing(ctx context.Context) error {
	var err error
	s.missing, err = nodesWhere(ctx, s.r.e, s.nodes, func(ctx context.Context, node string) (bool, error) {
		ok, err := hasImage(ctx, s.r.e, node, s.r.spec[node].Image)
		return !ok, err
	})
	return err
}

// Run pulls the image on the nodes that miss it, in parallel.
func (s *imageStep) Run(ctx context.Context, progress func(string)) error {
	if s.missing == nil {
		if err := s.findMissing(ctx); err != nil {
			return err
		}
	}
	toPull := stepenv.SortedSet(s.missing)
	report := stepenv.SyncProgress(progress, len(toPull) > 1)
	return s.r.e.ForEach(ctx, toPull, func(ctx context.Context, node string) error {
		return pull(ctx, s.r.e, node, s.r.spec[node].Image, func(msg string) { report(node, msg) }, s.r.dctx())
	})
}

// Verify reads back the image on the nodes that pulled it.
func (s *imageStep) Verify(ctx context.Context) error {
	return s.r.e.ForEach(ctx, stepenv.SortedSet(s.missing), func(ctx context.Context, node string) error {
		ok, err := hasImage(ctx, s.r.e, node, s.r.spec[node].Image)
		if err == nil && !ok {
			err = fmt.Errorf("image %s is still missing on %s after docker pull", s.r.spec[node].Image, node)
		}
		return err
	})
}
