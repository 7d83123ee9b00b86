package cluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/stepenv"
)

// rayListTimeout bounds one `ray list nodes`, a Python process.
const rayListTimeout = 60 * time.Second

// clusterRun is what the steps of one ray_cluster share, read-only once
// made: the environment, the work, and the declared containers by node.
// Each step keeps what it learns (the nodes it must act on) in its own
// fields; this is passed to each step's constructor.
type clusterRun struct {
	e    *stepenv.StepEnv
	w    *kind.Work
	c    *ClusterWork
	spec map[string]ContainerSpec
	head ContainerSpec
	// started are the nodes whose container the steps start, head first.
	started []string
}

// newClusterRun prepares what the steps of w share.
func newClusterRun(e *stepenv.StepEnv, w *kind.Work) *clusterRun {
	c := WorkOf(w)
	r := &clusterRun{e: e, w: w, c: c, spec: map[string]ContainerSpec{}}
	for _, s := range c.Specs {
		r.spec[s.Node] = s
		if c.Start[s.Node] {
			r.started = append(r.started, s.Node)
		}
	}
	if len(c.Specs) > 0 {
		r.head = c.Specs[0]
	}
	return r
}

// clusterSteps are the steps of a cluster's work, in order: remove the
// containers that must go; pull the image and check Ray in it (unless
// prepare did); start the head; reach the GCS from the workers and start
// them; verify Ray's node table.
func clusterSteps(e *stepenv.StepEnv, w *kind.Work) []apply.Step {
	c := WorkOf(w)
	r := newClusterRun(e, w)
	var steps []apply.Step
	if len(c.Remove) > 0 {
		steps = append(steps, newRemoveStep(r, c.Remove))
	}
	if w.Action == plan.Delete || len(c.Specs) == 0 {
		return steps
	}
	if len(r.started) > 0 && !e.Prepared {
		steps = append(steps, newImageStep(r, r.started), newRayStep(r, r.started))
	}
	var workers []string
	for _, n := range r.started {
		if n == r.head.Node {
			steps = append(steps, newStartStep(r, []string{n}))
		} else {
			workers = append(workers, n)
		}
	}
	if len(workers) > 0 {
		steps = append(steps, newGCSStep(r, workers), newStartStep(r, workers))
	}
	return append(steps, newVerifyStep(r))
}

// nodesWhere asks pred of nodes in parallel and returns the nodes for which
// it holds; the set is never nil, so that a step can tell "asked, none"
// from "not asked yet".
func nodesWhere(ctx context.Context, e *stepenv.StepEnv, nodes []string, pred func(ctx context.Context, node string) (bool, error)) (map[string]bool, error) {
	var mu sync.Mutex
	out := map[string]bool{}
	err := e.ForEach(ctx, nodes, func(ctx context.Context, node string) error {
		ok, err := pred(ctx, node)
		if err == nil && ok {
			mu.Lock()
			out[node] = true
			mu.Unlock()
		}
		return err
	})
	return out, err
}

// containerRunning returns an error when the container does not run.
func containerRunning(ctx context.Context, e *stepenv.StepEnv, node, container string) error {
	res, err := e.Read(ctx, node, "docker", "inspect", "--type", "container", "--format", "{{.State.Running}} {{.State.ExitCode}}", container)
	if err != nil {
		if stepenv.IsNoSuch(err) {
			return fmt.Errorf("container %s on %s is gone", container, node)
		}
		return fmt.Errorf("inspecting %s on %s: %w", container, node, err)
	}
	running, code, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	if running != "true" {
		return fmt.Errorf("container %s on %s exited (exit code %s)", container, node, code)
	}
	return nil
}

// rayNodes reads Ray's node table inside the head container.
func (r *clusterRun) rayNodes(ctx context.Context) ([]RayNode, error) {
	res, err := r.e.Run(ctx, r.head.Node, transport.Cmd{
		Argv:    []string{"docker", "exec", r.head.Name, "ray", "list", "nodes", "--format", "json", "--limit", "1000"},
		Timeout: rayListTimeout,
	})
	if err != nil {
		return nil, err
	}
	return ParseRayNodeList(res.Stdout)
}

// diagnose reads the head's and the started workers' container logs and
// returns err with the classified root cause.
func (r *clusterRun) diagnose(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		// Cancelled (an interrupt, a lost lock): no failure to classify.
		return err
	}
	srcs := []stepenv.LogSource{{Node: r.head.Node, Container: r.head.Name, Source: "ray head container"}}
	for _, node := range r.started {
		if node != r.head.Node {
			srcs = append(srcs, stepenv.LogSource{Node: node, Container: r.spec[node].Name, Source: "ray worker container"})
		}
	}
	logs := r.e.ContainerLogs(ctx, srcs)
	d := r.dctx()
	for _, l := range logs {
		// Ray's GCS could not bind its port on the head: ask who holds it.
		if l.Host == r.head.Node && (bytes.Contains(l.Text, []byte("Failed to bind to address")) || bytes.Contains(l.Text, []byte("already in use"))) {
			if holder := stepenv.PortHolder(ctx, r.e, r.head.Node, r.head.Port); holder != "" {
				d.PortHolders = map[int]string{r.head.Port: holder}
			}
			break
		}
	}
	return stepenv.Diagnosed(err, logs, d)
}

// dctx is the diagnose context with this cluster's own facts filled in.
func (r *clusterRun) dctx() diagnose.Context {
	d := r.e.Diagnose
	if d.Cluster == "" {
		d.Cluster = r.w.Address
	}
	if d.Image == "" {
		d.Image = r.head.Image
	}
	if d.HeadNode == "" {
		d.HeadNode = r.head.Node
	}
	if d.RayPort == 0 {
		d.RayPort = r.head.Port
	}
	if d.NodeAddrs == nil {
		d.NodeAddrs = map[string]string{}
		for _, s := range r.c.Specs {
			if s.NodeIP != "" {
				d.NodeAddrs[s.Node] = s.NodeIP
			}
		}
	}
	return d
}
