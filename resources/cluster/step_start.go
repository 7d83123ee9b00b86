package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/stepenv"
)

// startStep starts the containers of nodes (the head alone, or the
// workers in parallel). A container already running the declared spec
// is left alone. The head's start is verified from Ray's node table.
type startStep struct {
	r     *clusterRun
	nodes []string
	head  bool
	// pending are the nodes whose container must start; nil until checked.
	pending map[string]bool
}

func newStartStep(r *clusterRun, nodes []string) *startStep {
	return &startStep{r: r, nodes: nodes, head: len(nodes) == 1 && nodes[0] == r.head.Node}
}

// Name says head or workers, and where.
func (s *startStep) Name() string {
	if s.head {
		return "start ray head on " + s.r.head.Node
	}
	return "start ray workers on " + stepenv.DescribeNodes(s.nodes)
}

// Check is done when every node runs its declared container.
func (s *startStep) Check(ctx context.Context) (bool, error) {
	if err := s.findPending(ctx); err != nil {
		return false, err
	}
	return len(s.pending) == 0, nil
}

// findPending asks every node whether it runs its container into s.pending.
func (s *startStep) findPending(ctx context.Context) error {
	var err error
	s.pending, err = nodesWhere(ctx, s.r.e, s.nodes, func(ctx context.Context, node string) (bool, error) {
		ok, err := s.r.running(ctx, node)
		return !ok, err
	})
	return err
}

// Run starts the pending containers in parallel.
func (s *startStep) Run(ctx context.Context, progress func(string)) error {
	if s.pending == nil {
		if err := s.findPending(ctx); err != nil {
			return err
		}
	}
	done := stepenv.NewDoneSet()
	err := s.r.e.ForEach(ctx, stepenv.SortedSet(s.pending), func(ctx context.Context, node string) error {
		id, err := s.r.start(ctx, node)
		if err != nil {
			return err
		}
		s.r.e.Checks.ContainerStarted(node, s.r.spec[node].Name)
		done.Add(node, fmt.Sprintf("started %s on %s (%s)", s.r.spec[node].Name, node, shortID(id)))
		return nil
	})
	done.Report(progress)
	return err
}

// Verify waits for the head to be ALIVE in Ray's node table; the workers
// are verified with the whole table, by the last step.
func (s *startStep) Verify(ctx context.Context) error {
	if !s.head {
		return nil
	}
	return s.r.waitHead(ctx)
}

// running reports whether node already runs the declared container; an
// existing container that is not it is an error (the plan should have
// removed it).
func (r *clusterRun) running(ctx context.Context, node string) (bool, error) {
	spec := r.spec[node]
	res, err := r.e.Read(ctx, node, "docker", "inspect", "--type", "container", "--format", "{{.State.Running}} {{json .Config.Labels}}", spec.Name)
	if err != nil {
		if stepenv.IsNoSuch(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspecting %s on %s: %w", spec.Name, node, err)
	}
	state, raw, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	labels := map[string]string{}
	_ = json.Unmarshal([]byte(raw), &labels)
	rm := Removal{Node: node, Container: spec.Name}
	if !ownedBy(labels, r.e.Project, r.w.Address) {
		return false, foreignError(rm, labels, r.e.Project, r.w.Address)
	}
	if current, _ := spec.Current(labels[LabelSpecHash]); state == "true" && current {
		return true, nil
	}
	return false, fmt.Errorf("container %s already exists on %s (running=%s, spec hash %s, want %s) though the plan did not remove it; run rayform plan again",
		spec.Name, node, state, hostplan.OrNone(labels[LabelSpecHash]), spec.Hash())
}

// start runs the container and returns its id. The secret env, if any,
// reaches the container through its own tmpfs (see RunCmd): no file on the
// host's disk and no Docker configuration ever holds it, so no path
// (failure, interrupt, kill -9) can leave one behind.
func (r *clusterRun) start(ctx context.Context, node string) (string, error) {
	spec := r.spec[node]
	if spec.AuthOn() && spec.AuthToken == "" {
		// The lock holder makes the token before anything is observed
		// for apply: a head that did not answer with it cannot be given
		// a container that would start Ray without it.
		return "", fmt.Errorf("%s on %s: Ray's token authentication is on, but the deployment's token (~/.rayform/locks/%s on the head) was not read; run rayform apply again", r.w.Address, node, observe.BearerFile(secretKeyName(r.e.Project, r.c.Name)))
	}
	cmd := spec.RunCmd(r.e.Project)
	cmd.Mutating = true
	res, err := r.e.Run(ctx, node, cmd)
	if err != nil {
		if stepenv.ExitCode(err) < 0 || ctx.Err() != nil {
			return "", fmt.Errorf("docker run %s on %s: %w", spec.Name, node, err)
		}
		text := append(append([]byte(nil), res.Stdout...), res.Stderr...)
		return "", stepenv.Diagnosed(fmt.Errorf("docker run %s on %s failed: %w", spec.Name, node, err),
			[]diagnose.Log{{Host: node, Source: "docker run", Text: text}}, r.dctx())
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// waitHead polls Ray's node table until the head is ALIVE; registered
// under another address than its fabric one is an error naming both.
func (r *clusterRun) waitHead(ctx context.Context) error {
	want := r.head.NodeIP
	last := "no answer yet"
	err := r.e.PollUntil(ctx, r.e.RayReadyTimeout, func(ctx context.Context) (bool, error) {
		rows, err := r.rayNodes(ctx)
		if err != nil {
			if stepenv.IsNoSuch(err) {
				return false, fmt.Errorf("the ray head container %s on %s stopped: %w", r.head.Name, r.head.Node, err)
			}
			last = err.Error()
			return false, nil
		}
		for _, n := range rows {
			if n.IsHead && n.State == "ALIVE" {
				if want != "" && n.NodeIP != want {
					return true, fmt.Errorf("the ray head on %s registered in Ray's node table as %s, not its fabric address %s: "+
						"vLLM's c10d master and the workers would use %s", r.head.Node, n.NodeIP, want, n.NodeIP)
				}
				return true, nil
			}
		}
		last = "Ray's node table has no ALIVE head"
		return false, nil
	})
	if errors.Is(err, stepenv.ErrTimedOut) {
		err = fmt.Errorf("the ray head on %s is not ALIVE in Ray's node table after %s (last: %s)", r.head.Node, r.e.RayReadyTimeout, last)
	}
	if err != nil {
		return r.diagnose(ctx, err)
	}
	return nil
}
