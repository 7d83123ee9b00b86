package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rayform/rayform/resources/servefiles"
	"github.com/rayform/rayform/resources/stepenv"
)

// stopGrace is how long `docker stop` lets Ray shut down (and deregister
// from the GCS) before killing the container.
const stopGrace = 15

// removalsByNode groups removals by node, nodes sorted.
func removalsByNode(rems []Removal) ([]string, map[string][]Removal) {
	m := map[string][]Removal{}
	for _, rm := range rems {
		m[rm.Node] = append(m[rm.Node], rm)
	}
	return slices.Sorted(maps.Keys(m)), m
}

// removeStep stops and removes the containers that must go. It re-reads
// each container's labels on the host first and refuses, before removing
// anything, when one was not created by rayform for this project and
// resource.
type removeStep struct {
	r      *clusterRun
	rems   []Removal
	nodes  []string
	byNode map[string][]Removal
	// present are the removals whose container exists, with its labels;
	// nil until inspected.
	present map[Removal]map[string]string
}

func newRemoveStep(r *clusterRun, rems []Removal) *removeStep {
	nodes, byNode := removalsByNode(rems)
	return &removeStep{r: r, rems: rems, nodes: nodes, byNode: byNode}
}

// Name names the containers and their nodes.
func (s *removeStep) Name() string {
	names := map[string]bool{}
	for _, rm := range s.rems {
		names[rm.Container] = true
	}
	return fmt.Sprintf("remove container %s on %s", strings.Join(stepenv.SortedSet(names), ", "), stepenv.DescribeNodes(s.nodes))
}

// Check is done when none of the containers exists.
func (s *removeStep) Check(ctx context.Context) (bool, error) {
	if err := s.inspect(ctx); err != nil {
		return false, err
	}
	return len(s.present) == 0, nil
}

// inspect reads the labels of the containers that exist into s.present.
func (s *removeStep) inspect(ctx context.Context) error {
	var mu sync.Mutex
	present := map[Removal]map[string]string{}
	err := s.r.e.ForEach(ctx, s.nodes, func(ctx context.Context, node string) error {
		for _, rm := range s.byNode[node] {
			labels, found, err := containerLabels(ctx, s.r.e, node, rm.Container)
			if err != nil {
				return err
			}
			if found {
				mu.Lock()
				present[rm] = labels
				mu.Unlock()
			}
		}
		return nil
	})
	s.present = present
	return err
}

// Run refuses every present container rayform did not create for this
// resource, else stops and removes them, node by node in parallel.
func (s *removeStep) Run(ctx context.Context, progress func(string)) error {
	if s.present == nil {
		if err := s.inspect(ctx); err != nil {
			return err
		}
	}
	if err := s.refuseForeign(); err != nil {
		return err
	}
	done := stepenv.NewDoneSet()
	err := s.r.e.ForEach(ctx, s.nodes, func(ctx context.Context, node string) error {
		for _, rm := range s.byNode[node] {
			if _, ok := s.present[rm]; !ok {
				continue
			}
			if err := removeContainer(ctx, s.r.e, rm); err != nil {
				return err
			}
			done.Add(node, fmt.Sprintf("removed %s on %s", rm.Container, node))
		}
		return nil
	})
	done.Report(progress)
	return err
}

// refuseForeign is the refusal of every present container whose labels do
// not mark it as this resource's, nil when there is none.
func (s *removeStep) refuseForeign() error {
	var refused []error
	for _, rm := range s.rems {
		if labels, ok := s.present[rm]; ok && !ownedBy(labels, s.r.e.Project, s.r.w.Address) {
			refused = append(refused, foreignError(rm, labels, s.r.e.Project, s.r.w.Address))
		}
	}
	return errors.Join(refused...)
}

// Verify reads back that none of the containers exists.
func (s *removeStep) Verify(ctx context.Context) error {
	return s.r.e.ForEach(ctx, s.nodes, func(ctx context.Context, node string) error {
		for _, rm := range s.byNode[node] {
			_, found, err := containerLabels(ctx, s.r.e, node, rm.Container)
			if err != nil {
				return err
			}
			if found {
				return fmt.Errorf("container %s still exists on %s after docker rm", rm.Container, node)
			}
		}
		return nil
	})
}

// removeContainer stops a container, letting Ray shut down, and removes it.
func removeContainer(ctx context.Context, e *stepenv.StepEnv, rm Removal) error {
	if _, err := e.Mutate(ctx, rm.Node, "docker", "stop", "-t", strconv.Itoa(stopGrace), rm.Container); err != nil && !stepenv.IsNoSuch(err) {
		return fmt.Errorf("stopping %s on %s: %w", rm.Container, rm.Node, err)
	}
	if _, err := e.Mutate(ctx, rm.Node, "docker", "rm", rm.Container); err != nil && !stepenv.IsNoSuch(err) {
		return fmt.Errorf("removing %s on %s: %w", rm.Container, rm.Node, err)
	}
	// The serve records the container bind-mounted from the host go with
	// it. Best effort: the files belong to the container's user, so an SSH
	// user other than root may not remove them; a container of the same
	// name started later clears them at its start anyway.
	_, _ = e.Mutate(ctx, rm.Node, "rm", "-rf", "--", servefiles.Host(e.Project, rm.Node, rm.Container))
	return nil
}

// containerLabels reads a container's labels; found is false when there is
// no container of that name.
func containerLabels(ctx context.Context, e *stepenv.StepEnv, node, container string) (map[string]string, bool, error) {
	res, err := e.Read(ctx, node, "docker", "inspect", "--type", "container", "--format", "{{json .Config.Labels}}", container)
	if err != nil {
		if stepenv.IsNoSuch(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("inspecting %s on %s: %w", container, node, err)
	}
	labels := map[string]string{}
	if out := strings.TrimSpace(string(res.Stdout)); out != "" && out != "null" {
		if err := json.Unmarshal([]byte(out), &labels); err != nil {
			return nil, false, fmt.Errorf("inspecting %s on %s: labels %q: %w", container, node, out, err)
		}
	}
	return labels, true, nil
}

// ownedBy reports whether labels mark a container rayform created for
// resource in project.
func ownedBy(labels map[string]string, project, resource string) bool {
	return labels[LabelManaged] == "true" && labels[LabelProject] == project && labels[LabelResource] == resource
}

// foreignError refuses to touch a container rayform did not create.
func foreignError(rm Removal, labels map[string]string, project, resource string) error {
	show := func(k string) string {
		if v, ok := labels[k]; ok {
			return strconv.Quote(v)
		}
		return "(unset)"
	}
	return fmt.Errorf("refusing to remove container %s on %s: it is not rayform's container of %s in project %q "+
		"(labels %s=%s, %s=%s, %s=%s); rayform never touches a container it did not create. "+
		"Fix: remove it yourself if it is a leftover (ssh %s docker rm -f %s), or set container_name on the cluster",
		rm.Container, rm.Node, resource, project, LabelManaged, show(LabelManaged), LabelProject, show(LabelProject),
		LabelResource, show(LabelResource), rm.Node, rm.Container)
}
