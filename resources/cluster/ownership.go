package cluster

import (
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/plan"
)

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

// IsContainerOf reports whether labels are those of a ray_cluster
// container of project (the only containers a vllm_serve runs in).
func IsContainerOf(labels map[string]string, project string) bool {
	return labels[LabelManaged] == "true" && labels[LabelProject] == project && plan.ParseAddress(labels[LabelResource]).Type == Type
}

// labelPrefix starts the name of every label rayform sets.
const labelPrefix = "rayform."
