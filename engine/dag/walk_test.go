package dag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// event is a node starting or finishing inside a Walk callback.
type event struct {
	node   string
	finish bool
}

// recorder returns a callback that sends a start and a finish event for
// every node on events (which must have room for 2 per node).
func recorder(events chan<- event) func(context.Context, string) error {
	return func(_ context.Context, n string) error {
		events <- event{n, false}
		events <- event{n, true}
		return nil
	}
}

func drain(events chan event) []event {
	close(events)
	var out []event
	for e := range events {
		out = append(out, e)
	}
	return out
}

func TestWalkOrderingInvariant(t *testing.T) {
	tests := []struct {
		name        string
		g           *Graph
		parallelism int
	}{
		{"chain serial", build(nil, []edge{{"a", "b"}, {"b", "c"}}), 1},
		{"diamond", build(nil, []edge{{"top", "l"}, {"top", "r"}, {"l", "base"}, {"r", "base"}}), 4},
		{"random 300 nodes, p=1", randomDAG(300, 4, 3), 1},
		{"random 300 nodes, p=8", randomDAG(300, 4, 3), 8},
		{"random 300 nodes, default", randomDAG(300, 4, 5), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := make(chan event, 2*tt.g.Len())
			if err := tt.g.Walk(context.Background(), tt.parallelism, recorder(events)); err != nil {
				t.Fatalf("Walk: %v", err)
			}
			finished := map[string]bool{}
			starts := 0
			for _, e := range drain(events) {
				if e.finish {
					finished[e.node] = true
					continue
				}
				starts++
				for _, d := range tt.g.DependenciesOf(e.node) {
					if !finished[d] {
						t.Errorf("%s started before its dependency %s finished", e.node, d)
					}
				}
			}
			if starts != tt.g.Len() || len(finished) != tt.g.Len() {
				t.Errorf("ran %d nodes (%d finished), want %d", starts, len(finished), tt.g.Len())
			}
		})
	}
}

func TestWalkSerialOrderIsTopoOrder(t *testing.T) {
	g := randomDAG(100, 3, 11)
	want, err := g.TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = g.Walk(context.Background(), 1, func(_ context.Context, n string) error {
		got = append(got, n) // parallelism 1: calls never overlap
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("serial walk order differs from TopoOrder\ngot:  %q\nwant: %q", got, want)
	}
}

func TestWalkBoundedParallelism(t *testing.T) {
	tests := []struct {
		name        string
		parallelism int
		nodes       int
		wantMax     int
	}{
		{"bound 1", 1, 5, 1},
		{"bound 3", 3, 12, 3},
		{"default bound is 10", 0, 25, DefaultParallelism},
		{"negative means default", -4, 15, DefaultParallelism},
		{"fewer nodes than bound", 8, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New()
			for i := range tt.nodes {
				g.Add(fmt.Sprintf("n%02d", i))
			}
			var cur, peak atomic.Int64
			started := make(chan string)
			release := make(chan struct{})
			walkErr := make(chan error, 1)
			go func() {
				walkErr <- g.Walk(context.Background(), tt.parallelism, func(_ context.Context, n string) error {
					c := cur.Add(1)
					for {
						p := peak.Load()
						if c <= p || peak.CompareAndSwap(p, c) {
							break
						}
					}
					started <- n
					<-release
					cur.Add(-1)
					return nil
				})
			}()
			// The bound is reached: wantMax calls are in flight at once.
			for range tt.wantMax {
				<-started
			}
			if got := cur.Load(); got != int64(tt.wantMax) {
				t.Errorf("in flight after %d starts: %d", tt.wantMax, got)
			}
			// Release one call at a time; each release admits one more.
			for i := tt.wantMax; i < tt.nodes; i++ {
				release <- struct{}{}
				<-started
			}
			for range tt.wantMax {
				release <- struct{}{}
			}
			if err := <-walkErr; err != nil {
				t.Fatalf("Walk: %v", err)
			}
			if got := peak.Load(); got != int64(tt.wantMax) {
				t.Errorf("peak concurrency %d, want exactly %d", got, tt.wantMax)
			}
		})
	}
}

func TestWalkFailureSkipsDependents(t *testing.T) {
	// net <- node.a <- ray <- vllm ; net <- node.b ; other (unrelated) <- other2
	g := build(nil, []edge{
		{"node.a", "net"}, {"node.b", "net"}, {"ray", "node.a"}, {"ray", "node.b"},
		{"vllm", "ray"}, {"other2", "other"},
	})
	boom := errors.New("boom")
	var mu sync.Mutex
	ran := map[string]bool{}
	err := g.Walk(context.Background(), 2, func(_ context.Context, n string) error {
		mu.Lock()
		ran[n] = true
		mu.Unlock()
		if n == "node.a" {
			return boom
		}
		return nil
	})
	for _, n := range []string{"net", "node.a", "node.b", "other", "other2"} {
		if !ran[n] {
			t.Errorf("%s did not run", n)
		}
	}
	for _, n := range []string{"ray", "vllm"} {
		if ran[n] {
			t.Errorf("%s ran although its dependency failed", n)
		}
	}
	if !errors.Is(err, boom) || !errors.Is(err, ErrSkipped) {
		t.Fatalf("error should wrap boom and ErrSkipped: %v", err)
	}
	want := "node.a: boom\n" +
		"ray: skipped: a dependency failed: node.a\n" +
		"vllm: skipped: a dependency failed: node.a"
	if err.Error() != want {
		t.Errorf("wrong error\ngot:\n%s\nwant:\n%s", err, want)
	}
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Node != "node.a" || ne.Err != boom {
		t.Errorf("first NodeError = %+v, want node.a/boom", ne)
	}
	var se *SkippedError
	if !errors.As(err, &se) || se.Dependency != "node.a" {
		t.Errorf("SkippedError = %+v, want dependency node.a", se)
	}
}

func TestWalkTwoFailuresBothReported(t *testing.T) {
	g := build(nil, []edge{{"c", "a"}, {"c", "b"}})
	err := g.Walk(context.Background(), 1, func(_ context.Context, n string) error {
		if n == "c" {
			t.Error("c ran")
		}
		return fmt.Errorf("%s failed", n)
	})
	want := "a: a failed\nb: b failed\nc: skipped: a dependency failed: a"
	if err == nil || err.Error() != want {
		t.Errorf("wrong error\ngot:\n%v\nwant:\n%s", err, want)
	}
}

func TestWalkCycle(t *testing.T) {
	g := build(nil, []edge{{"a", "b"}, {"b", "a"}, {"c", "d"}})
	called := false
	err := g.Walk(context.Background(), 0, func(context.Context, string) error {
		called = true
		return nil
	})
	var ce *CycleError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CycleError, got %v", err)
	}
	if called {
		t.Error("fn called on a cyclic graph")
	}
}

func TestWalkEmpty(t *testing.T) {
	if err := New().Walk(context.Background(), 3, func(context.Context, string) error {
		t.Error("fn called on empty graph")
		return nil
	}); err != nil {
		t.Errorf("Walk on empty graph: %v", err)
	}
}

func TestWalkCancelStopsLaunching(t *testing.T) {
	// a and c are ready; with parallelism 1 only a runs, and it cancels.
	g := build([]string{"c"}, []edge{{"b", "a"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ran []string
	err := g.Walk(ctx, 1, func(_ context.Context, n string) error {
		ran = append(ran, n)
		cancel()
		return nil
	})
	if !slices.Equal(ran, []string{"a"}) {
		t.Errorf("ran %q, want only a", ran)
	}
	want := "b: context canceled\nc: context canceled"
	if err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Errorf("wrong error\ngot:\n%v\nwant:\n%s", err, want)
	}
}

func TestWalkCancelWaitsForRunning(t *testing.T) {
	// a and c run at once and block until cancelled; b waits on a.
	g := build([]string{"c"}, []edge{{"b", "a"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan string, 2)
	var returned atomic.Int64
	walkErr := make(chan error, 1)
	go func() {
		walkErr <- g.Walk(ctx, 2, func(ctx context.Context, n string) error {
			started <- n
			<-ctx.Done()
			returned.Add(1)
			return fmt.Errorf("interrupted: %w", ctx.Err())
		})
	}()
	got := []string{<-started, <-started}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("started %q, want a and c", got)
	}
	cancel()
	err := <-walkErr
	if n := returned.Load(); n != 2 {
		t.Errorf("Walk returned with %d of 2 running calls finished", n)
	}
	want := "a: interrupted: context canceled\nb: context canceled\nc: interrupted: context canceled"
	if err == nil || err.Error() != want {
		t.Errorf("wrong error\ngot:\n%v\nwant:\n%s", err, want)
	}
}

func TestWalkAlreadyCancelled(t *testing.T) {
	g := build([]string{"x"}, []edge{{"b", "a"}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := g.Walk(ctx, 0, func(context.Context, string) error {
		t.Error("fn called with a cancelled context")
		return nil
	})
	want := "a: context canceled\nb: context canceled\nx: context canceled"
	if err == nil || err.Error() != want {
		t.Errorf("wrong error\ngot:\n%v\nwant:\n%s", err, want)
	}
}

func BenchmarkWalk1000(b *testing.B) {
	g := randomDAG(1000, 5, 1)
	ctx := context.Background()
	noop := func(context.Context, string) error { return nil }
	for b.Loop() {
		if err := g.Walk(ctx, 10, noop); err != nil {
			b.Fatal(err)
		}
	}
}
