package cluster

import (
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/hostplan"
)

// managedDockerFlags maps the `docker run` options rayform sets to what
// controls each.
func managedDockerFlags() map[string]string {
	return map[string]string{
		"--name":       "set container_name instead",
		"--network":    "rayform runs every container with host networking; remove it",
		"--net":        "rayform runs every container with host networking; remove it",
		"--gpus":       "rayform gives the container all GPUs; remove it",
		"--detach":     "rayform runs the container detached; remove it",
		"--ipc":        "rayform runs the container with host IPC (NCCL needs it); remove it",
		"--restart":    "rayform restarts nothing behind Ray's back; remove it",
		"--entrypoint": "rayform's entrypoint writes vLLM's environment rules before ray start; remove it",
		"--shm-size":   "set shm_size instead",
	}
}

// dockerValueShorthands are the one-letter `docker run` options that take
// a value (the rest of a -xyz cluster, or the next word); -d, -i, -t, -P
// take none.
const dockerValueShorthands = "acehlmpuvw"

// checkDockerArgs finds the docker_args that set what rayform manages, as
// docker's flag parser (pflag) reads them: --flag, --flag=value, -d alone
// or in a cluster (-dit), and -e/--env with a pinned variable.
func checkDockerArgs(b *config.Block, args []string) {
	managed := managedDockerFlags()
	pinned := hostplan.PinnedEnv()
	env := func(a, v string) {
		name, _, _ := strings.Cut(v, "=")
		if from, ok := pinned[name]; ok {
			b.Error("docker_args", "Environment variable managed by rayform", fmt.Sprintf("docker_args contains %q, which sets %s; rayform sets it on every node from %s. Remove it; change the network or cluster argument instead.", a, name, from))
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if b.Decl().IsUnknown(fmt.Sprintf("docker_args[%d]", i)) {
			continue
		}
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a, "=")
			if how, ok := managed[name]; ok {
				b.Error("docker_args", "Argument managed by rayform", fmt.Sprintf("docker_args contains %q; %s.", a, how))
			}
			if name == "--env" {
				shown := a
				if !hasVal {
					val = next()
					shown += " " + val
				}
				env(shown, val)
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				c := a[j]
				if c == 'd' {
					b.Error("docker_args", "Argument managed by rayform", fmt.Sprintf("docker_args contains %q (-d: detach); rayform runs the container detached; remove it.", a))
				}
				if strings.IndexByte(dockerValueShorthands, c) >= 0 {
					val, shown := strings.TrimPrefix(a[j+1:], "="), a
					if val == "" {
						val = next()
						shown += " " + val
					}
					if c == 'e' {
						env(shown, val)
					}
					break
				}
			}
		}
	}
}
