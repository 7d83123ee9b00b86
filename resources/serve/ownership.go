package serve

import (
	"fmt"
	"maps"
	"slices"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
)

// Ownership: rayform acts only on containers whose labels prove they are
// its own, for the project and the resource (cluster.LabelManaged, cluster.LabelProject,
// cluster.LabelResource). This file keeps those labels rayform's: a configuration
// may not set them.

// refuseForeignServes drops from serves (the vllm_serves planned for
// destruction) each one whose container exists on its node without the
// labels of a ray_cluster container of project, with an error finding: a
// state entry (hand-edited or forged) naming a container rayform did not
// create must never make rayform signal or delete anything inside it. The
// probe does not look inside such a container either (engine/observe's
// rf_sexec).
func refuseForeignServes(finding func(plan.Finding), serves map[string]*ServeWork, facts *observe.Facts, project string) {
	for _, addr := range slices.Sorted(maps.Keys(serves)) {
		sw := serves[addr]
		hf := facts.Hosts[sw.Spec.Node]
		if hf == nil {
			continue
		}
		for _, c := range hf.Containers.List {
			if c.Name != sw.Spec.Container || cluster.IsContainerOf(c.Labels, project) {
				continue
			}
			finding(plan.Finding{Severity: plan.Error, Address: addr, Host: sw.Spec.Node,
				Summary: fmt.Sprintf("%s names container %s, which rayform did not create", addr, c.Name),
				Detail: fmt.Sprintf("%s runs in container %s on %s (as the state or the configuration says), but that container does not carry the labels of a ray_cluster of project %q (%s=%q, %s=%q, %s=%q). rayform never acts in, or looks inside, a container it did not create.",
					addr, c.Name, sw.Spec.Node, project, cluster.LabelManaged, c.Labels[cluster.LabelManaged], cluster.LabelProject, c.Labels[cluster.LabelProject], cluster.LabelResource, c.Labels[cluster.LabelResource]),
				Fix: fmt.Sprintf("If the state file was edited by hand, restore it, or forget the entry by removing %q from the resources of .rayform/state.json; if %s is a container of yours that took the cluster's container name, rename it.", addr, c.Name)})
			delete(serves, addr)
			break
		}
	}
}
