package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// validateConfig checks the rules that involve more than one block.
func validateConfig(cfg *Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	add := func(d *Decl, attr, summary, detail string) {
		rng := d.Range(attr)
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: &rng})
	}

	owner := map[string]string{} // node → cluster
	for _, name := range slices.Sorted(maps.Keys(cfg.RayClusters)) {
		rc := cfg.RayClusters[name]
		claim := func(node, attr string) {
			if prev, ok := owner[node]; ok {
				add(&rc.Decl, attr, "Node in two Ray clusters",
					fmt.Sprintf("Node %s is already in ray_cluster.%s. A node runs one Ray container, so it can belong to one cluster only; remove it from one of them.", node, prev))
				return
			}
			owner[node] = name
		}
		claim(rc.Head, "head")
		seen := map[string]bool{}
		for _, w := range rc.Workers {
			switch {
			case w == rc.Head:
				add(&rc.Decl, "workers", "Node is both head and worker",
					fmt.Sprintf("%s is the head of ray_cluster.%s and is also listed in workers. The head contributes its GPUs to the cluster already; remove it from workers.", w, name))
			case seen[w]:
				add(&rc.Decl, "workers", "Duplicate worker", fmt.Sprintf("%s appears more than once in the workers of ray_cluster.%s; list each node once.", w, name))
			default:
				seen[w] = true
				claim(w, "workers")
			}
		}
	}

	ports := map[string]string{} // "cluster:port" → serve
	for _, name := range slices.Sorted(maps.Keys(cfg.Serves)) {
		s := cfg.Serves[name]
		rc := cfg.RayClusters[s.Cluster]
		if rc == nil {
			continue
		}
		total := 0
		var parts []string
		gpusUnknown := s.IsUnknown("tensor_parallel_size") || s.IsUnknown("pipeline_parallel_size")
		for _, n := range rc.Nodes() {
			if node := cfg.Nodes[n]; node != nil {
				gpusUnknown = gpusUnknown || node.IsUnknown("gpus")
				total += node.GPUs
				parts = append(parts, fmt.Sprintf("%s: %d", n, node.GPUs))
			}
		}
		need := s.TensorParallelSize * s.PipelineParallelSize
		if need > total && !gpusUnknown {
			attr := "tensor_parallel_size"
			if _, ok := s.AttrRanges[attr]; !ok {
				attr = "pipeline_parallel_size"
			}
			add(&s.Decl, attr, "Not enough GPUs",
				fmt.Sprintf("vllm_serve.%s needs tensor_parallel_size × pipeline_parallel_size = %d × %d = %d GPUs, but the nodes of ray_cluster.%s declare %d in total (%s). Lower the parallelism, add workers to the cluster, or correct the nodes' gpus.",
					name, s.TensorParallelSize, s.PipelineParallelSize, need, rc.Name, total, strings.Join(parts, ", ")))
		}
		switch s.Port {
		case rc.Port, rc.DashboardPort:
			which := "port"
			if s.Port == rc.DashboardPort {
				which = "dashboard_port"
			}
			add(&s.Decl, "port", "Port conflict",
				fmt.Sprintf("Port %d is also the %s of ray_cluster.%s. vLLM's API server runs on the head with host networking, so choose another port.", s.Port, which, rc.Name))
		}
		key := fmt.Sprintf("%s:%d", s.Cluster, s.Port)
		if prev, ok := ports[key]; ok {
			add(&s.Decl, "port", "Port conflict",
				fmt.Sprintf("vllm_serve.%s also listens on port %d on the head of ray_cluster.%s; give each server its own port.", prev, s.Port, s.Cluster))
		}
		ports[key] = name
	}
	return diags
}
