package serve

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/clitables"
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
	known := make([]string, 0, len(args))
	for i := range args {
		if !b.Decl().IsUnknown(fmt.Sprintf("extra_args[%d]", i)) {
			known = append(known, args[i])
		} else {
			known = append(known, "")
		}
	}
	for _, u := range unknownToEveryVLLM(known) {
		b.Error("extra_args", "Unknown vLLM option", unknownOptionDetail(u, opts, "any vLLM rayform has the option table of ("+strings.Join(clitables.Versions("vllm-serve"), ", ")+")"))
	}
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

// unknownToEveryVLLM are the words of args that no embedded vLLM table
// knows as an option: misspellings, whatever the image's version. Plan
// checks the rest against the image's own version (extraArgsPlan).
func unknownToEveryVLLM(args []string) []vllmcli.Unknown {
	var out []vllmcli.Unknown
	for _, u := range vllmcli.ServeOptions().Unknowns(args) {
		unknown := true
		for _, v := range clitables.Versions("vllm-serve") {
			opts, err := vllmcli.OptionNames(v)
			if err == nil && len(opts.Unknowns([]string{u.Word})) == 0 {
				unknown = false
				break
			}
		}
		if unknown {
			out = append(out, u)
		}
	}
	return out
}

// unknownOptionDetail says that word u of extra_args is not an option of
// whose (a vLLM version, or several), and which option is nearest.
func unknownOptionDetail(u vllmcli.Unknown, opts vllmcli.Set, whose string) string {
	return fmt.Sprintf("extra_args[%d] is %q, which is not an option of %s: vllm serve would stop at once with \"unrecognized arguments\".", u.Index, u.Word, whose) +
		config.DidYouMean(u.Name, opts.LongNames(), "%s")
}

// extraArgsPlan checks sv's extra_args against the option table of the
// vLLM the cluster's image holds, as the image itself reported its version
// (the state's answer to the architecture query, local version segment
// included: "0.32.0+cpu" is 0.32.0's table). Validation already refused
// what no table knows; this refuses what the image's own vLLM lacks, or
// says in a note that no table describes the image's version. An image not
// asked yet is checked when apply asks it (archStep), before vllm serve
// starts.
func (p *planner) extraArgsPlan(sv *VLLMServe, rc *cluster.RayCluster, head *observe.HostFacts) {
	if len(sv.ExtraArgs) == 0 || head == nil {
		return
	}
	_, im, ok := p.imageAnswer(rc, head)
	if !ok || answerOf(im).VLLM == "" {
		return
	}
	version := answerOf(im).VLLM
	opts, table, ok := vllmcli.ForInstalled(version)
	if !ok {
		p.Note(fmt.Sprintf("the extra_args of %s were not checked against the image's vLLM %s: rayform has no option table for vLLM %s (it has %s).",
			sv.Addr, version, table, strings.Join(clitables.Versions("vllm-serve"), ", ")))
		return
	}
	r := sv.Range("extra_args")
	for _, u := range opts.Unknowns(sv.ExtraArgs) {
		p.Finding(plan.Finding{Severity: plan.Error, Address: sv.Addr, At: fmt.Sprintf("%s:%d", r.Filename, r.Start.Line),
			Summary: fmt.Sprintf("vLLM %s in the image has no option %s", version, u.Word),
			Detail:  unknownOptionDetail(u, opts, "vLLM "+version+" (the image's, option table "+table+")"),
			Fix:     unknownOptionFix(u, opts)})
	}
}

// unknownOptionFix is the fix of an unknown option.
func unknownOptionFix(u vllmcli.Unknown, opts vllmcli.Set) string {
	if n := config.Suggest(u.Name, opts.LongNames()); n != "" {
		return fmt.Sprintf("replace %s with %s in extra_args, or remove it", u.Word, n)
	}
	return fmt.Sprintf("remove %s from extra_args (vllm serve --help in the image lists its options)", u.Word)
}
