package config

import (
	"github.com/rayform/rayform/engine/dag"
	"maps"
	"slices"
)

// Graph returns the configuration's dependency graph. Its nodes are the
// addresses of every variable (var.NAME), local value (local.NAME), node
// instance (node.NAME or node.NAME["key"]), network, ray_cluster,
// vllm_serve and output; an edge from A to B means A depends on B (B comes
// first). Edges come from the references in each block's expressions (a
// reference to a for_each node block without a key depends on all its
// instances) and from what the references resolve to: a Ray cluster depends
// on its head, workers and network, a vllm_serve on its cluster, a node on
// its bastion.
func (c *Config) Graph() *dag.Graph {
	g := dag.New()
	for _, name := range slices.Sorted(maps.Keys(c.Variables)) {
		g.Add("var." + name)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Locals)) {
		g.Add("local." + name)
	}
	for _, n := range c.Nodes {
		g.Add(n.Addr)
	}
	for _, n := range c.Networks {
		g.Add(n.Addr)
	}
	for _, r := range c.RayClusters {
		g.Add(r.Addr)
	}
	for _, s := range c.Serves {
		g.Add(s.Addr)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Outputs)) {
		g.Add("output." + name)
	}
	for _, from := range slices.Sorted(maps.Keys(c.edges)) {
		for _, to := range slices.Sorted(maps.Keys(c.edges[from])) {
			g.Connect(from, to)
		}
	}
	return g
}
