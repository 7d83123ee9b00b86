package resources

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
)

// Ownership: rayform acts only on containers whose labels prove they are
// its own, for the project and the resource (LabelManaged, LabelProject,
// LabelResource). This file keeps those labels rayform's: a configuration
// may not set them.

// labelPrefix starts the name of every label rayform sets.
const labelPrefix = "rayform."

// checkLabelArgs refuses docker_args that would set one of rayform's
// labels (--label, --label=, -l, -l=, -lVALUE, -l in a cluster such as
// -tl), and every --label-file, whose labels validate cannot read: a
// container labelled with another project or resource would be orphaned,
// or taken for another deployment's. Labels of the user's own keys pass.
func checkLabelArgs(b *config.Block, args []string) {
	refuse := func(shown, key string) {
		b.Error("docker_args", "Label managed by rayform", fmt.Sprintf("docker_args contains %q, which sets the label %s; rayform sets every %s* label itself, and finds its containers by them. Remove it (your own labels under another prefix are fine).", shown, key, labelPrefix))
	}
	check := func(shown, value string) {
		key, _, _ := strings.Cut(value, "=")
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(key)), labelPrefix) {
			refuse(shown, key)
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if b.Decl().IsUnknown(fmt.Sprintf("docker_args[%d]", i)) {
			continue
		}
		next := func() (string, bool) {
			if i+1 < len(args) {
				i++
				return args[i], !b.Decl().IsUnknown(fmt.Sprintf("docker_args[%d]", i))
			}
			return "", false
		}
		switch {
		case a == "--label-file" || strings.HasPrefix(a, "--label-file="):
			b.Error("docker_args", "Label file refused", fmt.Sprintf("docker_args contains %q; rayform cannot check that the file sets none of its own %s* labels. Pass your labels with --label KEY=VALUE instead.", a, labelPrefix))
		case a == "--label":
			if v, ok := next(); ok {
				check(a+" "+v, v)
			}
		case strings.HasPrefix(a, "--label="):
			check(a, strings.TrimPrefix(a, "--label="))
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 1:
			// A cluster of shorthands: the first that takes a value takes
			// the rest of the word, or the next word (see checkDockerArgs).
			for j := 1; j < len(a); j++ {
				c := a[j]
				if strings.IndexByte(dockerValueShorthands, c) < 0 {
					continue
				}
				if c == 'l' {
					if v := strings.TrimPrefix(a[j+1:], "="); v != "" {
						check(a, v)
					} else if v, ok := next(); ok {
						check(a+" "+v, v)
					}
				} else if a[j+1:] == "" {
					next() // the option's value, not an option
				}
				break
			}
		}
	}
}

// clusterContainerOf reports whether labels are those of a ray_cluster
// container of project (the only containers a vllm_serve runs in).
func clusterContainerOf(labels map[string]string, project string) bool {
	return labels[LabelManaged] == "true" && labels[LabelProject] == project && plan.ParseAddress(labels[LabelResource]).Type == KindCluster
}

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
			if c.Name != sw.Spec.Container || clusterContainerOf(c.Labels, project) {
				continue
			}
			finding(plan.Finding{Severity: plan.Error, Address: addr, Host: sw.Spec.Node,
				Summary: fmt.Sprintf("%s names container %s, which rayform did not create", addr, c.Name),
				Detail: fmt.Sprintf("%s runs in container %s on %s (as the state or the configuration says), but that container does not carry the labels of a ray_cluster of project %q (%s=%q, %s=%q, %s=%q). rayform never acts in, or looks inside, a container it did not create.",
					addr, c.Name, sw.Spec.Node, project, LabelManaged, c.Labels[LabelManaged], LabelProject, c.Labels[LabelProject], LabelResource, c.Labels[LabelResource]),
				Fix: fmt.Sprintf("If the state file was edited by hand, restore it, or forget the entry by removing %q from the resources of .rayform/state.json; if %s is a container of yours that took the cluster's container name, rename it.", addr, c.Name)})
			delete(serves, addr)
			break
		}
	}
}
