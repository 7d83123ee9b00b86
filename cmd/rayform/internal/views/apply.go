package views

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
)

// Apply shows an apply or a destroy (run.View): for a person
// (ApplyHuman) or as NDJSON events (ApplyJSON).
type Apply interface {
	run.View
}

// ApplyOptions are what an apply view shows besides the run's events.
type ApplyOptions struct {
	// Destroy is set for destroy (and for a saved plan of a destroy).
	Destroy bool
	// Targeted is set when -target narrowed the run.
	Targeted bool
	// LockTimeout is -lock-timeout, said while waiting for a lock.
	LockTimeout time.Duration
	// Stdin is where the confirmation's answer is read.
	Stdin io.Reader
	// Version goes in the JSON events.
	Version string
	// Cost gives an observation's SSH cost (CostText).
	Cost func(*run.Observation) string
}

// NewApply is the apply view vt chooses.
func NewApply(vt arguments.ViewType, v *View, o ApplyOptions) Apply {
	base := applyBase{View: v, plan: NewPlan(vt, v, o.Version), o: o}
	if vt == arguments.ViewJSON {
		return &ApplyJSON{applyBase: base}
	}
	return &ApplyHuman{applyBase: base}
}

// applyBase is what both renderings share: the plan's view, the prompt
// and everything printed on stderr.
type applyBase struct {
	*View
	plan Plan
	o    ApplyOptions
}

var (
	_ run.View = (*ApplyHuman)(nil)
	_ run.View = (*ApplyJSON)(nil)
)

func (v *applyBase) op() string {
	if v.o.Destroy {
		return "destroy"
	}
	return "apply"
}

// Plan shows the plan about to be applied.
func (v *applyBase) Plan(obs *run.Observation) error {
	return v.plan.Plan(obs, func() string { return v.o.Cost(obs) }, "")
}

// Cancelled says the approval was refused.
func (v *applyBase) Cancelled() {
	if v.o.Destroy {
		fmt.Fprintln(v.stderr, "\nDestroy cancelled.")
	} else {
		fmt.Fprintln(v.stderr, "\nApply cancelled.")
	}
}

// Interrupting says the first interrupt came.
func (v *applyBase) Interrupting() {
	fmt.Fprintln(v.stderr, "\nInterrupt received.\nPlease wait for rayform to exit or data loss may occur.\nGracefully shutting down...")
}

// Failed prints each failed resource's error once and, when interrupted,
// what the interrupt cut short.
func (v *applyBase) Failed(err error, interrupted bool) { v.reportFailure(err, interrupted, v.op()) }

// NothingChanged says the checks before the walk failed.
func (v *applyBase) NothingChanged() {
	fmt.Fprintf(v.stderr, "\nNothing was changed: rayform stops before removing or stopping anything when what it would start cannot start.\n")
}

// LockLost says a lock was lost during the walk.
func (v *applyBase) LockLost(err error) { fmt.Fprintf(v.stderr, "\nError: %v\n", err) }

// Unreached tells, after a destroy, of every host it could not reach and
// the resources left there, which the state keeps.
func (v *applyBase) Unreached(un []run.Unreach) {
	var lines []string
	nodes := map[string]bool{}
	for _, u := range un {
		lines = append(lines, fmt.Sprintf("%s on %s: %s", u.Address, u.Node, u.Why))
		nodes[u.Node] = true
	}
	fmt.Fprintf(v.stderr, "\nError: destroy could not reach every host; what these resources have there is left, and the state keeps them:\n  %s\n\nMake %s reachable, then run rayform destroy again.\n",
		strings.Join(lines, "\n  "), strings.Join(slices.Sorted(maps.Keys(nodes)), ", "))
}

// LockWaiting says the run waits for a lock another rayform holds.
func (v *applyBase) LockWaiting(resource string, held *lock.HeldError) {
	fmt.Fprintf(v.stderr, "Waiting up to %s for the lock of %s: %v\n", v.o.LockTimeout, resource, held)
}

// LockBroken says a stale lock was broken.
func (v *applyBase) LockBroken(resource, host, record string) {
	fmt.Fprintf(v.stderr, "Warning: broke the stale lock of %s on %s (its holder %q stopped renewing it for more than %s)\n",
		resource, host, record, lock.DefaultLease)
}

// LockSkipped says a lock only the state records could not be taken.
func (v *applyBase) LockSkipped(resource, host string, err error) {
	fmt.Fprintf(v.stderr, "Warning: could not take the lock of %s on %s, where the state recorded it: %v\n", resource, host, err)
}

// Confirm asks Terraform's question; only "yes" approves. An interrupt
// (ctx ends: the first Ctrl-C at the prompt, or a lost lock) answers no at
// once, without waiting for a line.
func (v *applyBase) Confirm(ctx context.Context) bool {
	switch {
	case v.o.Destroy && v.o.Targeted:
		fmt.Fprint(v.stdout, "\nDo you really want to destroy the targeted resources?\n  rayform will destroy the resources shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	case v.o.Destroy:
		fmt.Fprint(v.stdout, "\nDo you really want to destroy all resources?\n  rayform will destroy all the resources shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	default:
		fmt.Fprint(v.stdout, "\nDo you want to perform these actions?\n  rayform will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	}
	answer := make(chan string, 1)
	go func() {
		// Left blocked on stdin after an interrupt: the process exits.
		line, err := bufio.NewReader(v.o.Stdin).ReadString('\n')
		if err != nil && line == "" {
			fmt.Fprintln(v.stdout)
		}
		answer <- line
	}()
	select {
	case line := <-answer:
		return strings.TrimSpace(line) == "yes"
	case <-ctx.Done():
		fmt.Fprintln(v.stdout)
		return false
	}
}

// ApplyHuman renders the run as text.
type ApplyHuman struct{ applyBase }

// Hooks render the progress as Terraform's lines.
func (v *ApplyHuman) Hooks() apply.Hooks { return newTextHooks(v.stdout, v.color) }

// Complete prints the counts and the outputs.
func (v *ApplyHuman) Complete(counts plan.Counts, obs *run.Observation, _ bool) {
	verb := "Apply"
	if v.o.Destroy {
		verb = "Destroy"
	}
	fmt.Fprintf(v.stdout, "\n%s complete! Resources: %d added, %d changed, %d destroyed.\n", verb, counts.Add, counts.Change, counts.Destroy)
	v.outputs(obs)
}

// outputs prints the outputs after a successful apply.
func (v *ApplyHuman) outputs(obs *run.Observation) {
	if len(obs.Result.Plan.Outputs) == 0 {
		return
	}
	fmt.Fprintf(v.stdout, "\nOutputs:\n\n")
	for _, o := range obs.Result.Plan.Outputs {
		val := "(sensitive value)"
		if !o.Sensitive {
			val = plan.FormatValue(o.Value)
		}
		fmt.Fprintf(v.stdout, "%s = %s\n", o.Name, val)
	}
}

// ApplyJSON renders the run as NDJSON events.
type ApplyJSON struct{ applyBase }

// Hooks render the progress as events.
func (v *ApplyJSON) Hooks() apply.Hooks { return &jsonHooks{w: v.stdout, now: time.Now} }

// Complete emits the change summary when something changed.
func (v *ApplyJSON) Complete(counts plan.Counts, _ *run.Observation, changed bool) {
	if !changed {
		return
	}
	e := plan.NewEvent(time.Now(), "info", "change_summary", fmt.Sprintf("Apply complete! Resources: %d added, %d changed, %d destroyed.", counts.Add, counts.Change, counts.Destroy))
	e["changes"] = map[string]any{"add": counts.Add, "change": counts.Change, "remove": counts.Destroy, "operation": "apply"}
	_ = plan.WriteEvent(v.stdout, e)
}

// OrphansEnded says what fencing a lock ended on a host: the commands an
// earlier rayform run (one killed, or cut off from the host) left running
// under the lock's fence there.
func (v *View) OrphansEnded(host, name string, gen uint64, ended []lock.Ended) {
	var b strings.Builder
	fence := "" // unknown when the fence itself failed
	if gen > 0 {
		fence = fmt.Sprintf(", fence generation %d", gen)
	}
	fmt.Fprintf(&b, "Warning: ended on %s %d command(s) that an earlier rayform run (lock %q%s) left running there:\n", host, len(ended), name, fence)
	for _, e := range ended {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	fmt.Fprint(v.stderr, b.String())
}

func unwrapAll(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unwrapAll(e)...)
		}
		return out
	}
	return []error{err}
}

// reportFailure prints each failed resource's error (which carries the
// classified cause, its evidence and the fix) once. When the run was
// interrupted, what the interrupt cut short or kept from starting is no
// failure: it is listed in one message, with what to do (op is "apply" or
// "destroy").
func (v *applyBase) reportFailure(err error, interrupted bool, op string) {
	var cut []string
	for _, e := range unwrapAll(err) {
		var se *apply.StepError
		if errors.As(e, &se) && errors.Is(se.Err, dag.ErrSkipped) {
			continue
		}
		if errors.Is(e, dag.ErrSkipped) {
			continue
		}
		if interrupted && (errors.Is(e, context.Canceled) || errors.Is(e, apply.ErrInterrupted)) {
			switch {
			case se != nil && errors.Is(e, apply.ErrInterrupted):
				cut = append(cut, fmt.Sprintf("%s: %s: %v", se.Address, se.Step, apply.ErrInterrupted))
			case se != nil:
				cut = append(cut, fmt.Sprintf("%s: %s: cut short", se.Address, se.Step))
			}
			// A node the walk never reached (an output, a resource with
			// nothing to do) is not worth a line.
			continue
		}
		msg := e.Error()
		if se != nil {
			msg = fmt.Sprintf("%s: %s failed:\n\n%s", se.Address, se.Step, se.Err.Error())
		}
		fmt.Fprintf(v.stderr, "\n╷\n│ Error: %s\n╵\n", strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n│ "))
	}
	if interrupted {
		msg := "Error: " + op + " interrupted"
		if len(cut) > 0 {
			msg += ":\n  " + strings.Join(cut, "\n  ")
		}
		fmt.Fprintf(v.stderr, "\n%s\n\nRun rayform %s again to finish.\n", msg, op)
	}
}
