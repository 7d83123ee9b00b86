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

	type result struct {
		node string
		err  error
	}
	var (
		pending  = make(map[string]int, len(g.nodes)) // dependencies not yet succeeded
		resolved = make(map[string]bool, len(g.nodes))
		started  = make(map[string]bool, len(g.nodes))
		errs     = map[string]error{}
		ready    = &stringHeap{}
		done     = make(chan result)
		running  = 0
		left     = len(g.nodes) // nodes not yet resolved
	)
	for n := range g.nodes {
		pending[n] = len(g.deps[n])
		if pending[n] == 0 {
			*ready = append(*ready, n)
		}
	}
	heap.Init(ready)

	resolve := func(n string, err error) {
		resolved[n] = true
		left--
		if err != nil {
			errs[n] = err
		}
	}

	for left > 0 {
		if err := ctx.Err(); err != nil {
			// Stop launching: every node not yet started is cancelled.
			for _, n := range g.Nodes() {
				if !resolved[n] && !started[n] {
					resolve(n, err)
				}
			}
			*ready = (*ready)[:0]
		}
		for running < parallelism && ready.Len() > 0 {
			n := heap.Pop(ready).(string)
			started[n] = true
			running++
			go func() {
				done <- result{n, fn(ctx, n)}
			}()
		}
		if running == 0 {
			break // only possible once everything left was cancelled
		}
		r := <-done
		running--
		resolve(r.node, r.err)
		if ctx.Err() != nil {
			// Cancelled while r ran: the loop's top cancels every node not
			// yet started, dependents of a failed r included, so the
			// outcome does not depend on which running call returns first.
			continue
		}
		if r.err != nil {
			g.skipDependents(r.node, resolved, resolve)
			continue
		}
		for _, d := range g.DependentsOf(r.node) {
			pending[d]--
			if pending[d] == 0 && !resolved[d] {
				heap.Push(ready, d)
			}
		}
	}

	names := make([]string, 0, len(errs))
	for n := range errs {
		names = append(names, n)
	}
	slices.Sort(names)
	joined := make([]error, 0, len(names))
	for _, n := range names {
		joined = append(joined, &NodeError{Node: n, Err: errs[n]})
	}
	return errors.Join(joined...)
}

// skipDependents resolves every unresolved transitive dependent of failed
// with a *SkippedError naming failed. None of them can be running: each
// waits on failed, directly or through another unresolved node.
func (g *Graph) skipDependents(failed string, resolved map[string]bool, resolve func(string, error)) {
	stack := g.DependentsOf(failed)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if resolved[n] {
			continue
		}
		resolve(n, &SkippedError{Dependency: failed})
		stack = append(stack, g.DependentsOf(n)...)
	}
}
