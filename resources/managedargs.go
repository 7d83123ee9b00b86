package resources

import (
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/vllmcli"
)

// managedServeOptions maps the vllm serve options rayform sets (by their
// long name) to what controls each. extra_args come last on the command
// line and argparse keeps the last value, so any spelling of these would
// silently override rayform.
func managedServeOptions() map[string]string {
	return map[string]string{
		"--tensor-parallel-size":         "set tensor_parallel_size instead",
		"--pipeline-parallel-size":       "set pipeline_parallel_size instead",
		"--gpu-memory-utilization":       "set gpu_memory_utilization instead",
		"--max-model-len":                "set max_model_len instead",
		"--port":                         "set port instead",
		"--served-model-name":            "set served_model_name instead",
		"--model":                        "set model instead",
		"--host":                         "rayform serves on 0.0.0.0 so that it can probe the server; remove it",
		"--distributed-executor-backend": "rayform always uses ray across nodes; remove it",
	}
}

// checkExtraArgs finds the words of extra_args that vLLM's parser binds to
// an option rayform manages, in every spelling it accepts (underscores,
// unambiguous prefixes, --opt=value, short aliases), and the ambiguous
// prefixes vLLM would refuse.
func checkExtraArgs(b *config.Block, args []string) {
	opts := vllmcli.ServeOptions()
	managed := managedServeOptions()
	for i, a := range args {
		if a == "--" {
			return
		}
		if b.Decl().IsSensitive(fmt.Sprintf("extra_args[%d]", i)) {
			b.Error("extra_args", "Sensitive value in extra_args",
				fmt.Sprintf("extra_args[%d] is sensitive, but extra_args become vLLM's command line, which every user of the host can read (/proc/PID/cmdline) and which vLLM prints in its log (\"non-default args\"). For the API key set api_key = ... (rayform passes it as VLLM_API_KEY in the environment); pass other secrets through env, e.g. env = { HF_TOKEN = var.hf_token }.", i))
			continue
		}
		if b.Decl().IsUnknown(fmt.Sprintf("extra_args[%d]", i)) {
			continue
		}
		word := vllmcli.Normalize(a)
		if name, _, ok := strings.Cut(strings.SplitN(word, "=", 2)[0], "."); ok && strings.HasPrefix(word, "--") {
			word = name // --opt.key value sets --opt
		}
		m := opts.Resolve(word)
		if len(m.Ambiguous) > 0 {
			b.Error("extra_args", "Ambiguous vLLM option", fmt.Sprintf("extra_args contains %q, which vLLM %s's argument parser refuses as ambiguous: it could be %s. Spell the option out.", a, vllmcli.Version, strings.Join(m.Ambiguous, ", ")))
			continue
		}
		if m.Option == nil {
			continue
		}
		if m.Option.Long() == "--api-key" {
			b.Error("extra_args", "API key in extra_args",
				fmt.Sprintf("extra_args contains %q, which puts the key on vLLM's command line (readable in /proc/PID/cmdline and printed in vLLM's log). Set api_key = ... instead: rayform passes it as VLLM_API_KEY in the environment.", a))
			continue
		}
		how, ok := managed[m.Option.Long()]
		if !ok {
			continue
		}
		seen := ""
		if name, _, _ := strings.Cut(a, "="); name != m.Option.Long() {
			seen = fmt.Sprintf(", which vLLM reads as %s", m.Option.Long())
		}
		b.Error("extra_args", "Argument managed by rayform", fmt.Sprintf("extra_args contains %q%s; %s, so that rayform can check it.", a, seen, how))
	}
}

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
	pinned := PinnedEnv()
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
