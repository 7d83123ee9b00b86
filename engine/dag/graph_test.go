package dag

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// edge is "from depends on to".
type edge struct{ from, to string }

func build(nodes []string, edges []edge) *Graph {
	g := New()
	for _, n := range nodes {
		g.Add(n)
	}
	for _, e := range edges {
		g.Connect(e.from, e.to)
	}
	return g
}

func TestAccessors(t *testing.T) {
	g := build([]string{"z"}, []edge{{"b", "a"}, {"c", "a"}, {"c", "b"}, {"c", "b"}})
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"Nodes", g.Nodes(), []string{"a", "b", "c", "z"}},
		{"DependenciesOf(c)", g.DependenciesOf("c"), []string{"a", "b"}},
		{"DependenciesOf(a)", g.DependenciesOf("a"), []string{}},
		{"DependentsOf(a)", g.DependentsOf("a"), []string{"b", "c"}},
		{"DependentsOf(missing)", g.DependentsOf("missing"), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !slices.Equal(tt.got, tt.want) {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if !g.Has("z") || g.Has("y") || g.Len() != 4 {
		t.Errorf("Has/Len wrong: Has(z)=%v Has(y)=%v Len=%d", g.Has("z"), g.Has("y"), g.Len())
	}
}

func TestTopoOrder(t *testing.T) {
	tests := []struct {
		name  string
		nodes []string
		edges []edge
		want  []string
	}{
		{"empty", nil, nil, []string{}},
		{"single", []string{"a"}, nil, []string{"a"}},
		{"independent nodes sorted", []string{"c", "a", "b"}, nil, []string{"a", "b", "c"}},
		{"chain runs dependencies first", nil, []edge{{"a", "b"}, {"b", "c"}}, []string{"c", "b", "a"}},
		{
			"diamond",
			nil,
			[]edge{{"top", "left"}, {"top", "right"}, {"left", "base"}, {"right", "base"}},
			[]string{"base", "left", "right", "top"},
		},
		{
			// Once "b" is placed, "a" (which waited on it) beats "c".
			"lexical tie-break among ready nodes",
			[]string{"c"},
			[]edge{{"a", "b"}},
			[]string{"b", "a", "c"},
		},
		{
			"ray cluster shape",
			nil,
			[]edge{
				{"ray_cluster.main", "node.a"},
				{"ray_cluster.main", "node.b"},
				{"vllm_serve.llama", "ray_cluster.main"},
				{"node.b", "network.fabric"},
				{"node.a", "network.fabric"},
			},
			[]string{"network.fabric", "node.a", "node.b", "ray_cluster.main", "vllm_serve.llama"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := build(tt.nodes, tt.edges).TopoOrder()
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("wrong order\ngot:  %q\nwant: %q", got, tt.want)
			}
		})
	}
}

func TestTopoOrderCycles(t *testing.T) {
	tests := []struct {
		name  string
		nodes []string
		edges []edge
		want  string
	}{
		{"self-loop", nil, []edge{{"a", "a"}}, "dependency cycle: a -> a"},
		{"two-cycle", nil, []edge{{"b", "a"}, {"a", "b"}}, "dependency cycle: a -> b -> a"},
		{
			"longer cycle starts at smallest node",
			nil,
			[]edge{{"d", "b"}, {"b", "c"}, {"c", "d"}},
			"dependency cycle: b -> c -> d -> b",
		},
		{
			"cycle beside acyclic part",
			[]string{"x"},
			[]edge{{"a", "b"}, {"b", "c"}, {"m", "n"}, {"n", "o"}, {"o", "m"}, {"p", "m"}},
			"dependency cycle: m -> n -> o -> m",
		},
		{
			// a depends on the cycle but is not on it; the report names the cycle.
			"dependent of a cycle is not reported",
			nil,
			[]edge{{"a", "q"}, {"q", "r"}, {"r", "q"}},
			"dependency cycle: q -> r -> q",
		},
		{
			"two cycles report the one with the smallest node",
			nil,
			[]edge{{"y", "z"}, {"z", "y"}, {"c", "d"}, {"d", "c"}},
			"dependency cycle: c -> d -> c",
		},
		{
			"shortest way back is chosen",
			nil,
			[]edge{{"a", "b"}, {"b", "a"}, {"b", "c"}, {"c", "a"}},
			"dependency cycle: a -> b -> a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build(tt.nodes, tt.edges)
			order, err := g.TopoOrder()
			if order != nil {
				t.Errorf("order should be nil on a cycle, got %q", order)
			}
			var ce *CycleError
			if !errors.As(err, &ce) {
				t.Fatalf("want *CycleError, got %T: %v", err, err)
			}
			if err.Error() != tt.want {
				t.Errorf("wrong error\ngot:  %s\nwant: %s", err, tt.want)
			}
			if ce.Cycle[0] != ce.Cycle[len(ce.Cycle)-1] {
				t.Errorf("cycle does not close: %q", ce.Cycle)
			}
			for i := 0; i+1 < len(ce.Cycle); i++ {
				if !slices.Contains(g.DependenciesOf(ce.Cycle[i]), ce.Cycle[i+1]) {
					t.Errorf("cycle step %s -> %s is not an edge", ce.Cycle[i], ce.Cycle[i+1])
				}
			}
		})
	}
}

func TestSubgraph(t *testing.T) {
	g := build([]string{"lonely"}, []edge{
		{"app", "db"}, {"db", "net"}, {"web", "app"}, {"other", "net"},
	})
	tests := []struct {
		name      string
		targets   []string
		wantNodes []string
		wantDOT   []string // edges expected in the subgraph
	}{
		{"leaf only", []string{"net"}, []string{"net"}, nil},
		{"transitive deps", []string{"app"}, []string{"app", "db", "net"}, []string{`"app" -> "db"`, `"db" -> "net"`}},
		{"two targets", []string{"web", "other"}, []string{"app", "db", "net", "other", "web"}, nil},
		{"unknown target ignored", []string{"nope", "lonely"}, []string{"lonely"}, nil},
		{"no targets", nil, []string{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := g.Subgraph(tt.targets)
			if got := sub.Nodes(); !slices.Equal(got, tt.wantNodes) {
				t.Errorf("nodes: got %q, want %q", got, tt.wantNodes)
			}
			for _, n := range sub.Nodes() {
				if !slices.Equal(sub.DependenciesOf(n), g.DependenciesOf(n)) {
					t.Errorf("%s: deps %q, want all of %q", n, sub.DependenciesOf(n), g.DependenciesOf(n))
				}
			}
			dot := sub.DOT()
			for _, e := range tt.wantDOT {
				if !strings.Contains(dot, e) {
					t.Errorf("DOT lacks %s:\n%s", e, dot)
				}
			}
		})
	}
}

func TestDOT(t *testing.T) {
	g := build([]string{"solo"}, []edge{{"b", "a"}, {"c", "a"}, {"c", "b"}, {`q"x`, "a"}})
	want := `digraph {
  compound = "true";
  newrank = "true";
  "a" [label = "a", shape = "box"];
  "b" [label = "b", shape = "box"];
  "c" [label = "c", shape = "box"];
  "q\"x" [label = "q\"x", shape = "box"];
  "solo" [label = "solo", shape = "box"];
  "b" -> "a";
  "c" -> "a";
  "c" -> "b";
  "q\"x" -> "a";
}
`
	if got := g.DOT(); got != want {
		t.Errorf("wrong DOT\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// nodeName is the name of node i in an n-node randomDAG.
func nodeName(i, n int) string { return fmt.Sprintf("n%03d.%x", (i*7919)%n, i) }

// randomDAG builds an n-node DAG whose edges only point from higher to
// lower indices, with names that do not sort in index order.
func randomDAG(n, maxDeps int, seed uint64) *Graph {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	name := func(i int) string { return nodeName(i, n) }
	g := New()
	for i := 0; i < n; i++ {
		g.Add(name(i))
		if i == 0 {
			continue
		}
		for k := r.IntN(maxDeps + 1); k > 0; k-- {
			g.Connect(name(i), name(r.IntN(i)))
		}
	}
	return g
}

func TestDeterminism(t *testing.T) {
	wantDOT := randomDAG(200, 4, 7).DOT()
	wantOrder, err := randomDAG(200, 4, 7).TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	// Node 0 depends on every other node, so any node that depends on
	// node 0 closes a loop through the graph.
	addLoop := func(g *Graph) {
		for i := 1; i < 200; i++ {
			g.Connect(nodeName(0, 200), nodeName(i, 200))
		}
	}
	cyclic := randomDAG(200, 4, 7)
	addLoop(cyclic)
	_, wantCycle := cyclic.TopoOrder()
	if wantCycle == nil {
		t.Fatal("expected a cycle")
	}
	for i := 0; i < 100; i++ {
		g := randomDAG(200, 4, 7)
		if got := g.DOT(); got != wantDOT {
			t.Fatalf("run %d: DOT differs", i)
		}
		got, err := g.TopoOrder()
		if err != nil || !slices.Equal(got, wantOrder) {
			t.Fatalf("run %d: order differs (err %v)", i, err)
		}
		c := randomDAG(200, 4, 7)
		addLoop(c)
		if _, err := c.TopoOrder(); err == nil || err.Error() != wantCycle.Error() {
			t.Fatalf("run %d: cycle %v, want %v", i, err, wantCycle)
		}
	}
}

func BenchmarkTopoOrder1000(b *testing.B) {
	g := randomDAG(1000, 5, 1)
	for b.Loop() {
		if _, err := g.TopoOrder(); err != nil {
			b.Fatal(err)
		}
	}
}
