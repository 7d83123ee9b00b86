package config

import (
	"maps"
	"slices"

	"github.com/rayform/rayform/engine/dag"
)

// Graph returns the configuration's dependency graph. Its nodes are the
// addresses of every variable (var.NAME), local value (local.NAME), block
// instance of a registered kind (KIND.NAME, or KIND.NAME["key"] for a
// for_each instance) and output; an edge from A to B means A depends on B
// (B comes first). Edges come from the references in each block's
// expressions (a reference to a for_each block without a key depends on
// all its instances) and from what reference arguments resolve to (a Ray
// cluster depends on its head, workers and network).
func (c *Config) Graph() *dag.Graph {
	g := dag.New()
	for _, name := range slices.Sorted(maps.Keys(c.Variables)) {
		g.Add("var." + name)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Locals)) {
		g.Add("local." + name)
	}
	for _, kind := range c.Kinds() {
		for _, name := range slices.Sorted(maps.Keys(c.blocks[kind])) {
			g.Add(c.blocks[kind][name].(Declarer).Declaration().Addr)
		}
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
