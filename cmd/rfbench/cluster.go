//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rayform/rayform/cmd/rflab/lab"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/node"
)

// Names in the generated configuration.
const (
	// projectName is the configuration directory's base name, so rayform's
	// project label (the directory name by default) is this.
	projectName = "rfbench"
	nodeBlock   = "spark"
	clusterName = "bench"
	serveName   = "qwen"
)

// clusterHCL renders the configuration of one Ray cluster over every node
// of l. With forEach the nodes come from one block with for_each (as in
// examples/h100-4x8-pp), so 2 and 64 nodes are the same file but for the
// map; without, one block per node (as the lab's own rayform.hcl). The
// serve runs tensor parallel inside a node and pipeline parallel across
// nodes, as the lab's own rayform.hcl does.
func clusterHCL(l *lab.Lab, forEach bool) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Written by rfbench for lab %q (%d nodes). Run rayform in %s.", l.Name, len(l.Nodes), l.ClientNetns)
	w("")
	head, workers := "", ""
	if forEach {
		w("variable \"hosts\" {")
		w("  description = \"Node key => management address. %s is the Ray head.\"", l.Nodes[0].Name)
		w("  type        = map(string)")
		w("  default = {")
		for _, n := range l.Nodes {
			w("    %s = %q", n.Name, n.MgmtIP)
		}
		w("  }")
		w("}")
		w("")
		w("locals {")
		w("  head = %q", l.Nodes[0].Name)
		w("}")
		w("")
		w("node %q {", nodeBlock)
		w("  for_each = var.hosts")
		w("")
		w("  host          = each.value")
		w("  user          = \"root\"")
		w("  identity_file = %q", l.Key)
		w("  gpus          = %d", l.Nodes[0].GPUs)
		w("}")
		w("")
		head = fmt.Sprintf("node.%s[local.head]", nodeBlock)
		workers = fmt.Sprintf("[for k, n in node.%s : n if k != local.head]", nodeBlock)
	} else {
		var ws []string
		for _, n := range l.Nodes {
			w("node %q {", n.Name)
			w("  host          = %q", n.MgmtIP)
			w("  user          = \"root\"")
			w("  identity_file = %q", l.Key)
			w("  gpus          = %d", n.GPUs)
			w("}")
			w("")
			ws = append(ws, "node."+n.Name)
		}
		head = ws[0]
		workers = "[" + strings.Join(ws[1:], ", ") + "]"
	}
	w("network \"fabric\" {")
	w("  cidr      = \"%s0/24\"", lab.FabricPrefix)
	w("  interface = %q", l.Nodes[0].FabricIfname)
	w("}")
	w("")
	image, _, _ := strings.Cut(lab.ImageRayVLLM, ":")
	w("ray_cluster %q {", clusterName)
	w("  image          = %q", image)
	w("  head           = %s", head)
	w("  workers        = %s", workers)
	w("  network        = network.fabric")
	w("  memory_monitor = false")
	w("  dataplane_check = false # the lab image has no python3 and torch")
	w("}")
	w("")
	tp, pp := 0, 1
	for _, n := range l.Nodes {
		tp += n.GPUs
	}
	if len(l.Nodes) > 2 {
		tp, pp = l.Nodes[0].GPUs, len(l.Nodes)
	}
	w("vllm_serve %q {", serveName)
	w("  cluster                = ray_cluster.%s", clusterName)
	w("  model                  = \"Qwen/Qwen3.5-122B-A10B-FP8\"")
	w("  served_model_name      = \"qwen3.5-122b\"")
	w("  tensor_parallel_size   = %d", max(tp, 1))
	if pp > 1 {
		w("  pipeline_parallel_size = %d", pp)
	}
	w("  gpu_memory_utilization = 0.85")
	w("  max_model_len          = 32768")
	w("}")
	return b.String()
}

// writeCluster writes the configuration into dir/rfbench (the project
// name is the directory's) and returns that directory.
func writeCluster(dir string, l *lab.Lab, forEach bool) (string, error) {
	cdir := filepath.Join(dir, projectName)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return "", fmt.Errorf("config dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cdir, "main.hcl"), []byte(clusterHCL(l, forEach)), 0o644); err != nil {
		return "", fmt.Errorf("write config: %w", err)
	}
	return cdir, nil
}

// nodeName is the name rayform gives lab node labNode: the for_each
// instance of the node block, or the block of the same name.
func nodeName(labNode string, forEach bool) string {
	if forEach {
		return fmt.Sprintf("%s[%q]", nodeBlock, labNode)
	}
	return labNode
}

// probeScripts returns, per lab node name, the probe script rayform's
// observer runs there for the configuration in cdir: run.ObserveSpec
// of the loaded configuration and state, then observe.ProbeScript.
func probeScripts(cdir string) (map[string]string, error) {
	cfg, diags := config.Load(cdir, config.Options{Kinds: resources.Kinds().Schemas()})
	if diags.HasErrors() {
		return nil, fmt.Errorf("load %s: %s", cdir, diags.Error())
	}
	st, err := state.Load(filepath.Join(cdir, state.DefaultPath))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	spec := run.ObserveSpec(resources.Kinds(), cfg, st, projectName, false)
	nodes := kind.BlocksOf[node.Node](cfg, node.Type)
	out := map[string]string{}
	for name, hs := range spec.Hosts {
		n := nodes[name]
		if n == nil {
			return nil, fmt.Errorf("observe spec names %s, not a node", name)
		}
		host := n.Name
		if n.Key != "" {
			host = n.Key // the lab node name, as in the lab's ssh_config
		}
		out[host] = observe.ProbeScript(hs)
	}
	return out, nil
}

// writeProbes writes each probe script to dir/probe-NODE.sh and returns the
// floor helper's HOST=FILE arguments, sorted.
func writeProbes(dir string, scripts map[string]string) ([]string, error) {
	var targets []string
	for host, s := range scripts {
		p := filepath.Join(dir, "probe-"+host+".sh")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			return nil, fmt.Errorf("write probe: %w", err)
		}
		targets = append(targets, host+"="+p)
	}
	sort.Strings(targets)
	return targets, nil
}
