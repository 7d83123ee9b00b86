//go:build linux

package lab

import (
	"fmt"
	"path/filepath"
	"strings"
)

// rayformHCL renders a rayform configuration for the lab, shaped like
// examples/dgx-spark-pair: the nodes over SSH (root with the lab's key; the
// host keys are in the lab's known_hosts, which ssh_config names), the fabric
// network, a Ray cluster of every node on the lab's Ray + vLLM image and a
// vLLM server, under a declared project. Without Torch the image cannot run the data-plane check, which
// is turned off.
func (l *Lab) rayformHCL() string { return l.rayformHCLWith(hclDeclaresModel) }

// rayformHCLWith renders rayform.hcl, declaring the model (modelHCL) when
// withModel.
func (l *Lab) rayformHCLWith(withModel bool) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	home := l.ClientHome
	if home == "" {
		home = filepath.Join(l.Dir, "client-home")
	}
	w("# rayform configuration of lab %q, written by `rflab up`.", l.Name)
	w("# Run rayform against it with:")
	w("#")
	w("#   rflab run -name %s plan    (or apply, status, logs vllm_serve.qwen, ...)", l.Name)
	w("#")
	w("# which runs the rayform beside rflab in the lab's client namespace (the only")
	w("# one with a route to the nodes), with the lab's client home (its ~/.ssh knows")
	w("# the nodes' host keys), in this directory:")
	w("#")
	w("#   ip netns exec %s env HOME=%s rayform -chdir %s plan", l.ClientNetns, home, l.Dir)
	w("#")
	w("# SSH: %s (known_hosts: %s).", l.SSHConfig, l.KnownHosts)
	w("")
	// The project is declared: a copy of this file in another directory
	// manages the same deployment (the default, the directory's name,
	// would make it another project).
	w("rayform {")
	w("  project = %q", filepath.Base(l.Dir))
	w("}")
	w("")
	gpus := 0
	ifnames := map[string]bool{}
	for _, n := range l.Nodes {
		w("node %q {", n.Name)
		w("  host          = %q", n.MgmtIP)
		w("  user          = \"root\"")
		w("  identity_file = %q", l.Key)
		w("  gpus          = %d", n.GPUs)
		w("}")
		w("")
		gpus += n.GPUs
		ifnames[n.FabricIfname] = true
	}
	w("network \"fabric\" {")
	w("  cidr      = \"%s0/24\"", FabricPrefix)
	if len(ifnames) == 1 {
		w("  interface = %q", l.Nodes[0].FabricIfname)
	} else {
		w("  interface = {")
		for _, n := range l.Nodes {
			w("    %s = %q", n.Name, n.FabricIfname)
		}
		w("  }")
	}
	if l.Nodes[0].FabricMTU != DefaultFabricMTU {
		w("  mtu       = %d", l.Nodes[0].FabricMTU)
	}
	w("}")
	if !l.Docker {
		return b.String()
	}
	w("")
	image, _, _ := strings.Cut(ImageRayVLLM, ":")
	// The names are those of examples/dgx-spark-pair, whose failures the
	// lab replays; the comments say what the lab really runs under them.
	w("# The names below are examples/dgx-spark-pair's (two DGX Sparks serving Qwen3.5),")
	w("# so this file reads like that one; what runs under them differs. The image is")
	w("# not that GB10 image: lab up built it under that name into the lab's registry,")
	w("# holding %s.", l.imageContents())
	w("ray_cluster \"spark\" {")
	w("  image          = %q", image)
	w("  head           = node.%s", l.Nodes[0].Name)
	var workers []string
	for _, n := range l.Nodes[1:] {
		workers = append(workers, "node."+n.Name)
	}
	w("  workers        = [%s]", strings.Join(workers, ", "))
	w("  network        = network.fabric")
	w("  memory_monitor = false")
	if !l.Torch {
		w("  # The lab image has no python3 and torch (lab up -torch adds them).")
		w("  dataplane_check = false")
	}
	w("}")
	w("")
	model, served := "\"Qwen/Qwen3.5-122B-A10B-FP8\"", "qwen3.5-122b"
	if withModel {
		b.WriteString(l.modelHCL())
		model, served = "model.tiny.source", "tiny"
	}
	if withModel {
		w("# Named qwen as in examples/dgx-spark-pair, but it serves the lab hub's")
		w("# %s (served_model_name %q), not Qwen.", l.ModelRepo(), served)
	}
	w("vllm_serve \"qwen\" {")
	w("  cluster                = ray_cluster.spark")
	w("  model                  = %s", model)
	w("  served_model_name      = %q", served)
	tp, pp := gpus, 1
	if len(l.Nodes) > 2 && l.Nodes[0].GPUs > 0 {
		// Tensor parallel inside a node, pipeline parallel across nodes.
		tp, pp = l.Nodes[0].GPUs, len(l.Nodes)
	}
	maxLen := 32768
	if withModel {
		// The lab hub's tiny model: 4 attention heads, 2 layers (one per
		// shard), 4096 positions.
		tp, pp, maxLen = min(tp, 2), min(pp, 2), 4096
	}
	if tp < 1 {
		tp = 1
	}
	w("  tensor_parallel_size   = %d", tp)
	if pp > 1 {
		w("  pipeline_parallel_size = %d", pp)
	}
	w("  gpu_memory_utilization = 0.85")
	w("  max_model_len          = %d", maxLen)
	if l.RealVLLM {
		w("  # vLLM %s's CPU build (lab up -vllm real). On the CPU platform", VLLMVersion)
		w("  # --gpu-memory-utilization is the share of the host's memory vLLM")
		w("  # reserves; an explicit KV cache size replaces it. The container has no")
		w("  # C++ compiler for torch.compile's CPU code: eager mode. float32: the")
		w("  # model's own type, which every x86 CPU's kernels take.")
		w("  extra_args             = [\"--kv-cache-memory-bytes\", \"64M\", \"--enforce-eager\", \"--dtype\", \"float32\"]")
		w("  ready_timeout          = \"15m\"")
	}
	w("}")
	w("")
	w("output \"endpoint\" {")
	w("  value = vllm_serve.qwen.endpoint")
	w("}")
	w("")
	w("# The head's management address: vLLM answers there only with")
	w("# listen = \"all\" (by default it listens on the head's fabric address).")
	w("output \"public_endpoint\" {")
	w("  value = vllm_serve.qwen.public_endpoint")
	w("}")
	return b.String()
}

// imageContents says what the lab's ImageRayVLLM holds in this lab, for
// rayform.hcl's comment on its borrowed name.
func (l *Lab) imageContents() string {
	switch {
	case l.RealVLLM:
		return fmt.Sprintf("the real Ray %s and vLLM %s's CPU build (no CUDA)", RayVersion, VLLMVersion)
	case l.RealRay:
		return fmt.Sprintf("the real Ray %s and simnode playing vllm (no CUDA)", RayVersion)
	default:
		return "simnode playing ray and vllm (no CUDA)"
	}
}

// hclDeclaresModel makes rayform.hcl declare the lab hub's HubRepoTiny as
// a model block that the serve uses (modelHCL). It waits for the model
// kind's registration in resources (a configuration naming an unknown
// block type does not load).
const hclDeclaresModel = true

// modelHCL is the model block of rayform.hcl: the lab hub's public
// repository, which lab up placed on the head only (unless -model-seed
// false), so plan shows the other nodes' copies absent and apply stages
// them from the head over the fabric; in the default cache_dir, which is
// every node's own disk (ModelCacheDir).
func (l *Lab) modelHCL() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	endpoint := l.HubEndpoint
	if endpoint == "" {
		endpoint = "http://" + HubAddr()
	}
	if m := l.Seeded; m != nil {
		w("# The lab hub's %s: lab up put a complete copy on %s only (%s in its cache %s).", m.Repo, m.Node, m.Commit[:12], m.CacheDir)
	} else {
		w("# The lab hub's %s: on no node yet (lab up -model-seed=false).", l.ModelRepo())
	}
	w("model \"tiny\" {")
	w("  source   = %q", l.ModelRepo())
	w("  revision = \"main\"")
	w("  endpoint = %q", endpoint)
	w("}")
	w("")
	return b.String()
}
