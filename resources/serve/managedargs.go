package serve

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/vllmcli"
)

// serveFlag is one option rayform puts on vllm serve's command line and
// what sets it. serveFlags is the one home of the mapping from
// vllm_serve's arguments to vLLM's options: ServeSpecFor builds the
// command line from it, checkExtraArgs refuses its options in extra_args,
// and the schema's descriptions name the options from it (serveFlagDoc).
type serveFlag struct {
	// flag is the option's long name; "--model" is given as vllm serve's
	// positional model argument.
	flag string
	// arg is the vllm_serve argument that sets it, "" when rayform sets it
	// itself; why then says why extra_args must not.
	arg, why string
	// value is the option's value for sv on cluster rc; false leaves the
	// option out.
	value func(sv *VLLMServe, rc *cluster.RayCluster) (string, bool)
}

// serveFlags lists, in command-line order, the options rayform sets.
func serveFlags() []serveFlag {
	itoa := func(n int) (string, bool) { return strconv.Itoa(n), true }
	return []serveFlag{
		{flag: "--model", arg: "model", value: func(sv *VLLMServe, _ *cluster.RayCluster) (string, bool) { return sv.Model, true }},
		{flag: "--served-model-name", arg: "served_model_name", value: func(sv *VLLMServe, _ *cluster.RayCluster) (string, bool) {
			if sv.ServedModelName == "" {
				return sv.Model, true
			}
			return sv.ServedModelName, true
		}},
		{flag: "--tensor-parallel-size", arg: "tensor_parallel_size", value: func(sv *VLLMServe, _ *cluster.RayCluster) (string, bool) {
			return itoa(max(sv.TensorParallelSize, 1))
		}},
		{flag: "--pipeline-parallel-size", arg: "pipeline_parallel_size", value: func(sv *VLLMServe, _ *cluster.RayCluster) (string, bool) {
			return itoa(max(sv.PipelineParallelSize, 1))
		}},
		{flag: "--gpu-memory-utilization", arg: "gpu_memory_utilization", value: func(sv *VLLMServe, _ *cluster.RayCluster) (string, bool) {
			return strconv.FormatFloat(sv.GPUMemoryUtilization, 'f', -1, 64), true
		}},
		{flag: "--host", arg: "listen", value: func(sv *VLLMServe, rc *cluster.RayCluster) (string, bool) {
			return listenHost(sv, rc)
		}},
		{flag: "--port", arg: "port", value: func(sv *VLLMServe, _ *cluster.RayCluster) (string, bool) { return itoa(sv.Port) }},
		{flag: "--distributed-executor-backend", why: "rayform always uses ray across nodes; remove it", value: func(_ *VLLMServe, rc *cluster.RayCluster) (string, bool) {
			return "ray", len(rc.Workers) > 0
		}},
		{flag: "--max-model-len", arg: "max_model_len", value: func(sv *VLLMServe, _ *cluster.RayCluster) (string, bool) {
			return strconv.Itoa(sv.MaxModelLen), sv.MaxModelLen > 0
		}},
	}
}

// Where vLLM's API listens (VLLMServe.Listen).
const (
	// ListenFabric is the head's fabric address only.
	ListenFabric = "fabric"
	// ListenAll is every address of the head.
	ListenAll = "all"
)

// listenHost is vLLM's --host for sv on rc: 0.0.0.0 for ListenAll, else
// the head's fabric address; false while that address is not observed
// (the serve's start refuses a command line without it: see
// ServeSpec.ListenHost).
func listenHost(sv *VLLMServe, rc *cluster.RayCluster) (string, bool) {
	if sv.Listen == ListenAll {
		return "0.0.0.0", true
	}
	if !rc.HeadAddress.IsValid() {
		return "", false
	}
	return rc.HeadAddress.String(), true
}

// ListensOn is sv's API port on its cluster and whether it demands a key
// (kind.Listener).
func (sv *VLLMServe) ListensOn(cluster string) (port int, keyed, ok bool) {
	return sv.Port, sv.APIKey != "", sv.Cluster == cluster
}

// Exposed reports whether sv answers beyond the fabric without a key.
func (sv *VLLMServe) Exposed() bool { return sv.Listen == ListenAll && sv.APIKey == "" }

// serveArgs is the command line of vllm serve for sv on rc, before
// extra_args.
func serveArgs(sv *VLLMServe, rc *cluster.RayCluster) []string {
	args := []string{"vllm", "serve"}
	for _, f := range serveFlags() {
		v, ok := f.value(sv, rc)
		switch {
		case !ok:
		case f.flag == "--model":
			args = append(args, v)
		default:
			args = append(args, f.flag, v)
		}
	}
	return args
}

// serveFlagDoc is the option argument arg sets, as the README shows it.
func serveFlagDoc(arg string) string {
	for _, f := range serveFlags() {
		if f.arg == arg {
			return "`" + f.flag + "`"
		}
	}
	panic("resources: no vllm serve option for " + arg)
}

// ManagedServeOptions maps the vllm serve options rayform sets (by their
// long name) to what controls each. extra_args come last on the command
// line and argparse keeps the last value, so any spelling of these would
// silently override rayform.
func ManagedServeOptions() map[string]string {
	out := map[string]string{}
	for _, f := range serveFlags() {
		out[f.flag] = f.why
		if f.arg != "" {
			out[f.flag] = "set " + f.arg + " instead"
		}
	}
	return out
}

// checkExtraArgs finds the words of extra_args that vLLM's parser binds to
// an option rayform manages, in every spelling it accepts (underscores,
// unambiguous prefixes, --opt=value, short aliases), and the ambiguous
// prefixes vLLM would refuse.
func checkExtraArgs(b *config.Block, args []string) {
	opts := vllmcli.ServeOptions()
	managed := ManagedServeOptions()
	for i, a := range args {
		if a == "--" {
			return
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
