// Package dag is a small string-keyed directed acyclic graph with a
// deterministic topological order, a context-aware bounded-parallelism
// walker and a DOT renderer. It knows nothing about rayform's domain.
//
// Edge direction follows Terraform's internal/dag convention: an edge goes
// from a dependent to its dependency. Connect("b", "a") means "b depends on
// a", so a runs before b. Every order this package returns lists
// dependencies before their dependents.
package dag

import (
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Graph is a directed graph keyed by node name. The zero value is not
// usable; call New. A Graph is not safe for concurrent mutation, but any
// number of goroutines may read it (including Walk) once it is built.
type Graph struct {
	nodes map[string]struct{}
	deps  map[string]map[string]struct{} // node -> nodes it depends on
	rdeps map[string]map[string]struct{} // node -> nodes that depend on it
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{
		nodes: map[string]struct{}{},
		deps:  map[string]map[string]struct{}{},
		rdeps: map[string]map[string]struct{}{},
	}
}

// Add adds node to the graph. Adding an existing node is a no-op.
func (g *Graph) Add(node string) {
	g.nodes[node] = struct{}{}
}

// Connect records that from depends on to: to runs before from. Both nodes
// are added if missing. Connecting a node to itself creates a self-loop,
// which TopoOrder and Walk report as a cycle.
func (g *Graph) Connect(from, to string) {
	g.Add(from)
	g.Add(to)
	if g.deps[from] == nil {
		g.deps[from] = map[string]struct{}{}
	}
	g.deps[from][to] = struct{}{}
	if g.rdeps[to] == nil {
		g.rdeps[to] = map[string]struct{}{}
	}
	g.rdeps[to][from] = struct{}{}
}

// Has reports whether node is in the graph.
func (g *Graph) Has(node string) bool {
	_, ok := g.nodes[node]
	return ok
}

// Len returns the number of nodes.
func (g *Graph) Len() int { return len(g.nodes) }

// Nodes returns every node, sorted.
func (g *Graph) Nodes() []string { return slices.Sorted(maps.Keys(g.nodes)) }

// DependenciesOf returns the nodes n directly depends on, sorted.
func (g *Graph) DependenciesOf(n string) []string { return slices.Sorted(maps.Keys(g.deps[n])) }

// DependentsOf returns the nodes that directly depend on n, sorted.
func (g *Graph) DependentsOf(n string) []string { return slices.Sorted(maps.Keys(g.rdeps[n])) }

// TopoOrder returns every node with dependencies before dependents. Among
// nodes whose dependencies are all placed, the lexically smallest comes
// first, so the order is fully deterministic. If the graph has a cycle it
// returns a *CycleError.
func (g *Graph) TopoOrder() ([]string, error) {
	pending := make(map[string]int, len(g.nodes)) // unplaced dependencies
	ready := &stringHeap{}
	for n := range g.nodes {
		pending[n] = len(g.deps[n])
		if pending[n] == 0 {
			*ready = append(*ready, n)
		}
	}
	heap.Init(ready)
	order := make([]string, 0, len(g.nodes))
	for ready.Len() > 0 {
		n := heap.Pop(ready).(string)
		order = append(order, n)
		for d := range g.rdeps[n] {
			pending[d]--
			if pending[d] == 0 {
				heap.Push(ready, d)
			}
		}
	}
	if len(order) != len(g.nodes) {
		return nil, g.findCycle(pending)
	}
	return order, nil
}

// findCycle returns the cycle through the lexically smallest node that lies
// on any cycle, following dependency edges in sorted order (shortest path
// back to the start, ties broken lexically). left holds the in-degree
// counters TopoOrder could not bring to zero; only those nodes can be on a
// cycle.
func (g *Graph) findCycle(left map[string]int) *CycleError {
	var candidates []string
	for n, c := range left {
		if c > 0 {
			candidates = append(candidates, n)
		}
	}
	slices.Sort(candidates)
	for _, start := range candidates {
		if path := g.pathBack(start); path != nil {
			return &CycleError{Cycle: path}
		}
	}
	// Unreachable: Kahn's algorithm leaves nodes only when a cycle exists.
	return &CycleError{Cycle: candidates}
}

// pathBack returns the shortest dependency path start -> ... -> start, or
// nil if start is not on a cycle. The BFS visits dependencies in sorted
// order, so the result is deterministic.
func (g *Graph) pathBack(start string) []string {
	parent := map[string]string{}
	queue := []string{start}
	seen := map[string]bool{}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, d := range g.DependenciesOf(n) {
			if d == start {
				path := []string{start}
				for cur := n; cur != start; cur = parent[cur] {
					path = append(path, cur)
				}
				slices.Reverse(path[1:])
				return append(path, start)
			}
			if !seen[d] {
				seen[d] = true
				parent[d] = n
				queue = append(queue, d)
			}
		}
	}
	return nil
}

// CycleError reports a dependency cycle. Cycle starts and ends with the same
// node, the lexically smallest one on the cycle, following dependency edges.
type CycleError struct {
	Cycle []string
}

// Error renders the cycle as "dependency cycle: a -> b -> a".
func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Cycle, " -> ")
}

// Subgraph returns a new graph holding targets and all their transitive
// dependencies, with the edges among them. Targets that are not in g are
// ignored; callers that want to reject unknown targets check Has first.
func (g *Graph) Subgraph(targets []string) *Graph {
	sub := New()
	stack := make([]string, 0, len(targets))
	for _, t := range targets {
		if g.Has(t) {
			stack = append(stack, t)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if sub.Has(n) {
			continue
		}
		sub.Add(n)
		for d := range g.deps[n] {
			stack = append(stack, d)
		}
	}
	for n := range sub.nodes {
		for d := range g.deps[n] {
			sub.Connect(n, d)
		}
	}
	return sub
}

// WithDependents returns, sorted, the targets that are in g and every node
// that depends on them, directly or not: what Terraform's destroy -target
// destroys (a target's dependencies are left alone).
func (g *Graph) WithDependents(targets []string) []string {
	seen := map[string]struct{}{}
	var stack []string
	for _, t := range targets {
		if g.Has(t) {
			stack = append(stack, t)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := seen[n]; ok {
			continue
		}
		seen[n] = struct{}{}
		for d := range g.rdeps[n] {
			stack = append(stack, d)
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// DOT renders the graph in Graphviz DOT, in the style of `terraform graph`:
// graph attributes, then every node as a labelled box, then every edge
// (dependent -> dependency), all sorted so the output is byte-for-byte
// deterministic.
func (g *Graph) DOT() string {
	var b strings.Builder
	b.WriteString("digraph {\n")
	b.WriteString("  compound = \"true\";\n")
	b.WriteString("  newrank = \"true\";\n")
	nodes := g.Nodes()
	for _, n := range nodes {
		fmt.Fprintf(&b, "  %s [label = %s, shape = \"box\"];\n", dotQuote(n), dotQuote(n))
	}
	for _, n := range nodes {
		for _, d := range g.DependenciesOf(n) {
			fmt.Fprintf(&b, "  %s -> %s;\n", dotQuote(n), dotQuote(d))
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// dotQuote returns s as a DOT double-quoted string.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// stringHeap is a min-heap of strings for lexical tie-breaking.
type stringHeap []string

func (h stringHeap) Len() int           { return len(h) }
func (h stringHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h stringHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *stringHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *stringHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
