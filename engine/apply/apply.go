// Package apply walks a plan's steps in dependency order: each resource's
// steps run one after another, independent resources in parallel, and a
// failed resource stops its dependents but not unrelated work. Every step has
// a check (skip when already satisfied), a run (idempotent) and a verify
// (read back from the host). The package knows nothing about Ray or vLLM; it
// reports what happens through Hooks and never prints.
package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/plan"
)

// Step is one unit of work of a resource, as a type: what it learns in
// Check (what is missing, on which nodes) it keeps in its own fields for
// Run and Verify. The walk calls Check; when it reports false with a nil
// error, Run and then Verify; a nil error from Verify means the outcome
// holds. A step value is used for one walk, by one goroutine at a time.
type Step interface {
	// Name says what the step does, e.g. "start ray head on spark1".
	Name() string
	// Check reports whether the step's outcome already holds; true skips
	// Run and Verify, false with a nil error runs them.
	Check(ctx context.Context) (bool, error)
	// Run does the work. It must be idempotent, and it may be called
	// without Check (a step reused by another, as a failed start stops
	// what is left of it). Progress reports lines (e.g. "Loading
	// safetensors checkpoint shards: 8/39") to the hooks.
	Run(ctx context.Context, progress func(msg string)) error
	// Verify reads back the outcome from the host; a nil error means it
	// holds.
	Verify(ctx context.Context) error
}

// Func is a Step made of functions, for steps with no state of their own;
// a nil function behaves as a step with nothing to check (always run),
// nothing to run or nothing to verify.
type Func struct {
	// Label is the step's Name.
	Label string
	// CheckFunc is Check; nil means always run.
	CheckFunc func(ctx context.Context) (bool, error)
	// RunFunc is Run; nil does nothing.
	RunFunc func(ctx context.Context, progress func(msg string)) error
	// VerifyFunc is Verify; nil means Run's success is enough.
	VerifyFunc func(ctx context.Context) error
}

// Name is f.Label.
func (f Func) Name() string { return f.Label }

// Check calls f.CheckFunc; without one the step always runs.
func (f Func) Check(ctx context.Context) (bool, error) {
	if f.CheckFunc == nil {
		return false, nil
	}
	return f.CheckFunc(ctx)
}

// Run calls f.RunFunc, if any.
func (f Func) Run(ctx context.Context, progress func(msg string)) error {
	if f.RunFunc == nil {
		return nil
	}
	return f.RunFunc(ctx, progress)
}

// Verify calls f.VerifyFunc, if any.
func (f Func) Verify(ctx context.Context) error {
	if f.VerifyFunc == nil {
		return nil
	}
	return f.VerifyFunc(ctx)
}

// Resource is the work for one resource address.
type Resource struct {
	Address string
	Action  plan.Action
	Steps   []Step
	// Ahead marks a part of a resource's work that runs ahead of the rest
	// (a serve stopped before its cluster changes): its steps are reported,
	// but not the resource's start and completion, which belong to its
	// main part: "Replacement complete" is said once, when it is.
	Ahead bool
}

// Hooks receive what happens during the walk. Implementations must be safe
// for concurrent use: resources run in parallel.
type Hooks interface {
	ResourceStart(addr string, action plan.Action)
	StepStart(addr, step string)
	StepSkipped(addr, step string)
	Progress(addr, msg string)
	ResourceComplete(addr string, action plan.Action, elapsed time.Duration)
	ResourceErrored(addr string, action plan.Action, elapsed time.Duration, err error)
}

// StepError is a step's failure, naming the resource and the step.
type StepError struct {
	Address string
	Step    string
	Err     error
}

func (e *StepError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Address, e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// ErrInterrupted is returned for steps not started because the walk was
// asked to stop gracefully.
var ErrInterrupted = errors.New("interrupted: not started")

// Options control a walk.
type Options struct {
	// Parallelism bounds how many resources run at once (default 10).
	Parallelism int
	// Stop, when closed, lets running steps finish but starts no new step:
	// the first Ctrl-C. Cancelling ctx aborts running steps: the second.
	Stop <-chan struct{}
}

// Walk runs resources in the order of g (an edge from a to b means a
// depends on b). Resources absent from the map are treated as no-ops. It
// returns the joined errors of every failed or skipped resource.
func Walk(ctx context.Context, g *dag.Graph, resources map[string]*Resource, hooks Hooks, opts Options) error {
	return g.Walk(ctx, opts.Parallelism, func(ctx context.Context, addr string) error {
		r, ok := resources[addr]
		if !ok || r.Action == plan.NoOp || len(r.Steps) == 0 {
			return nil
		}
		return runResource(ctx, r, hooks, opts.Stop)
	})
}

func runResource(ctx context.Context, r *Resource, hooks Hooks, stop <-chan struct{}) error {
	start := time.Now()
	started := false
	for _, s := range r.Steps {
		select {
		case <-stop:
			err := &StepError{Address: r.Address, Step: s.Name(), Err: ErrInterrupted}
			if started {
				hooks.ResourceErrored(r.Address, r.Action, time.Since(start), err)
			}
			return err
		default:
		}
		if err := ctx.Err(); err != nil {
			return &StepError{Address: r.Address, Step: s.Name(), Err: err}
		}
		if !started {
			if !r.Ahead {
				hooks.ResourceStart(r.Address, r.Action)
			}
			started = true
		}
		if err := runStep(ctx, r.Address, s, hooks); err != nil {
			err = &StepError{Address: r.Address, Step: s.Name(), Err: err}
			hooks.ResourceErrored(r.Address, r.Action, time.Since(start), err)
			return err
		}
	}
	if !r.Ahead {
		hooks.ResourceComplete(r.Address, r.Action, time.Since(start))
	}
	return nil
}

// Prepare runs, before the walk, the steps that prove the walk's changes
// can be made, and change nothing the hosts run (an image pulled next to
// the running containers, a check in a throwaway container): every
// resource's steps in order, resources in parallel (at most
// opts.Parallelism), each failure a *StepError. Hooks see the steps and a
// failure (the resource's action failed, before it began), not the
// resources' start and completion: nothing was replaced yet. opts.Stop
// starts no new step; cancelling ctx aborts the running ones.
func Prepare(ctx context.Context, resources []*Resource, hooks Hooks, opts Options) error {
	parallelism := opts.Parallelism
	if parallelism <= 0 {
		parallelism = 10
	}
	sem := make(chan struct{}, parallelism)
	errs := make([]error, len(resources))
	var wg sync.WaitGroup
	for i, r := range resources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			for _, s := range r.Steps {
				select {
				case <-opts.Stop:
					errs[i] = &StepError{Address: r.Address, Step: s.Name(), Err: ErrInterrupted}
					return
				default:
				}
				if err := ctx.Err(); err != nil {
					errs[i] = &StepError{Address: r.Address, Step: s.Name(), Err: err}
					return
				}
				if err := runStep(ctx, r.Address, s, hooks); err != nil {
					errs[i] = &StepError{Address: r.Address, Step: s.Name(), Err: err}
					hooks.ResourceErrored(r.Address, r.Action, time.Since(start), errs[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func runStep(ctx context.Context, addr string, s Step, hooks Hooks) error {
	done, err := s.Check(ctx)
	if err != nil {
		return fmt.Errorf("checking: %w", err)
	}
	if done {
		hooks.StepSkipped(addr, s.Name())
		return nil
	}
	hooks.StepStart(addr, s.Name())
	if err := s.Run(ctx, func(msg string) { hooks.Progress(addr, msg) }); err != nil {
		return err
	}
	if err := s.Verify(ctx); err != nil {
		return fmt.Errorf("verifying: %w", err)
	}
	return nil
}
