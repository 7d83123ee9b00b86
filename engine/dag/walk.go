package dag

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
)

// DefaultParallelism is the number of concurrent calls Walk makes when asked
// for parallelism <= 0, the same default as Terraform's -parallelism.
const DefaultParallelism = 10

// ErrSkipped is wrapped by the error of every node Walk did not run because
// one of its transitive dependencies failed.
var ErrSkipped = errors.New("skipped: a dependency failed")

// SkippedError is the error Walk records for a node it did not run because
// Dependency (a direct or transitive dependency) failed. It wraps ErrSkipped.
type SkippedError struct {
	Dependency string
}

// Error names the failed dependency.
func (e *SkippedError) Error() string {
	return fmt.Sprintf("%s: %s", ErrSkipped, e.Dependency)
}

// Unwrap returns ErrSkipped.
func (e *SkippedError) Unwrap() error { return ErrSkipped }

// NodeError is one node's error in the result of Walk.
type NodeError struct {
	Node string
	Err  error
}

// Error renders as "<node>: <err>".
func (e *NodeError) Error() string { return e.Node + ": " + e.Err.Error() }

// Unwrap returns the node's own error.
func (e *NodeError) Unwrap() error { return e.Err }

// Walk calls fn once for every node, dependencies first, with at most
// parallelism calls in flight (parallelism <= 0 means DefaultParallelism).
// A node starts only after all its dependencies returned nil; among nodes
// ready at the same time the lexically smallest starts first.
//
// When fn fails for a node, its transitive dependents are not run and
// record a *SkippedError (wrapping ErrSkipped) naming the failed node;
// unrelated nodes keep running. Once ctx is cancelled no new node starts:
// every node not yet started records ctx.Err(), and Walk waits for the calls
// already running to return.
//
// Walk returns nil if every call succeeded, a *CycleError if the graph has a
// cycle (fn is then never called), and otherwise errors.Join of one
// *NodeError per failed, skipped or cancelled node, sorted by node name.
func (g *Graph) Walk(ctx context.Context, parallelism int, fn func(ctx context.Context, node string) error) error {
	if _, err := g.TopoOrder(); err != nil {
		return err
	}
	if parallelism <= 0 {
		parallelism = DefaultParallelism
	}
	w := newWalk(g)
	for w.left > 0 {
		if err := ctx.Err(); err != nil {
			w.cancelUnstarted(err)
		}
		for w.running < parallelism && w.ready.Len() > 0 {
			w.start(ctx, fn)
		}
		if w.running == 0 {
			break // only possible once everything left was cancelled
		}
		r := <-w.done
		w.running--
		w.resolve(r.node, r.err)
		if ctx.Err() != nil {
			// Cancelled while r ran: the loop's top cancels every node not
			// yet started, dependents of a failed r included, so the
			// outcome does not depend on which running call returns first.
			continue
		}
		w.release(r)
	}
	return w.err()
}

// walkResult is what one call of a Walk's fn returned for its node.
type walkResult struct {
	node string
	err  error
}

// walk is the state of one Walk: which nodes wait on how many
// dependencies, which are ready, running or resolved, and the errors.
type walk struct {
	g        *Graph
	pending  map[string]int // dependencies not yet succeeded
	resolved map[string]bool
	started  map[string]bool
	errs     map[string]error
	ready    *stringHeap
	done     chan walkResult
	running  int
	left     int // nodes not yet resolved
}

// newWalk returns the walk of g with every node without dependencies
// ready.
func newWalk(g *Graph) *walk {
	w := &walk{
		g:        g,
		pending:  make(map[string]int, len(g.nodes)),
		resolved: make(map[string]bool, len(g.nodes)),
		started:  make(map[string]bool, len(g.nodes)),
		errs:     map[string]error{},
		ready:    &stringHeap{},
		done:     make(chan walkResult),
		left:     len(g.nodes),
	}
	for n := range g.nodes {
		w.pending[n] = len(g.deps[n])
		if w.pending[n] == 0 {
			*w.ready = append(*w.ready, n)
		}
	}
	heap.Init(w.ready)
	return w
}

// resolve records that node n is done, with err if it failed, was skipped
// or cancelled.
func (w *walk) resolve(n string, err error) {
	w.resolved[n] = true
	w.left--
	if err != nil {
		w.errs[n] = err
	}
}

// cancelUnstarted stops launching: every node not yet started is resolved
// with err.
func (w *walk) cancelUnstarted(err error) {
	for _, n := range w.g.Nodes() {
		if !w.resolved[n] && !w.started[n] {
			w.resolve(n, err)
		}
	}
	*w.ready = (*w.ready)[:0]
}

// start runs fn for the smallest ready node in a goroutine that reports
// on w.done.
func (w *walk) start(ctx context.Context, fn func(ctx context.Context, node string) error) {
	n := heap.Pop(w.ready).(string)
	w.started[n] = true
	w.running++
	go func() {
		w.done <- walkResult{n, fn(ctx, n)}
	}()
}

// release follows r's outcome: a failure skips r's dependents; a success
// makes each dependent whose dependencies all succeeded ready.
func (w *walk) release(r walkResult) {
	if r.err != nil {
		w.skipDependents(r.node)
		return
	}
	for _, d := range w.g.DependentsOf(r.node) {
		w.pending[d]--
		if w.pending[d] == 0 && !w.resolved[d] {
			heap.Push(w.ready, d)
		}
	}
}

// err is errors.Join of one *NodeError per node that did not succeed,
// sorted by node name.
func (w *walk) err() error {
	names := make([]string, 0, len(w.errs))
	for n := range w.errs {
		names = append(names, n)
	}
	slices.Sort(names)
	joined := make([]error, 0, len(names))
	for _, n := range names {
		joined = append(joined, &NodeError{Node: n, Err: w.errs[n]})
	}
	return errors.Join(joined...)
}

// skipDependents resolves every unresolved transitive dependent of failed
// with a *SkippedError naming failed. None of them can be running: each
// waits on failed, directly or through another unresolved node.
func (w *walk) skipDependents(failed string) {
	stack := w.g.DependentsOf(failed)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if w.resolved[n] {
			continue
		}
		w.resolve(n, &SkippedError{Dependency: failed})
		stack = append(stack, w.g.DependentsOf(n)...)
	}
}
