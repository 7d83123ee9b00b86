package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/run"
)

func runApply(ctx context.Context, c *cli, args []string) int {
	var opts runOptions
	fs := newFlagSet(c, "apply", "apply [options] [PLAN]\n\n  Observe the hosts, show the plan, ask for confirmation, and make the hosts\n  match the configuration, verifying every step. With PLAN (from plan -out),\n  apply exactly that plan, or refuse if the hosts changed since.")
	opts.register(fs)
	autoApprove := fs.Bool("auto-approve", false, "skip the interactive confirmation")
	opts.registerLock(fs, "applying")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(c.stderr, "Error: apply takes at most one argument, a saved plan (got %q)\n", fs.Args())
		return exitError
	}
	planPath := fs.Arg(0)
	if !*autoApprove && planPath == "" {
		if why := noPromptReason(&opts); why != "" {
			fmt.Fprintf(c.stderr, "Error: Plan file or auto-approve required\n\nrayform cannot ask for interactive approval when %s. Use -auto-approve or apply a saved plan.\n", why)
			return exitError
		}
	}
	var saved *planfile.File
	if planPath != "" {
		f, err := planfile.Read(planPath)
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		saved = f
		if len(opts.targets) > 0 || len(opts.replace) > 0 {
			fmt.Fprintln(c.stderr, "Error: -target and -replace cannot be given with a saved plan: the plan already records its own")
			return exitError
		}
		opts.targets = append(opts.targets, f.Targets...)
		opts.replace = append(opts.replace, f.Replace...)
	}
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	return s.apply(ctx, run.ApplyRequest{AutoApprove: *autoApprove || saved != nil, Saved: saved, Destroy: saved != nil && saved.Destroy})
}

// registerLock registers -lock and -lock-timeout (apply and destroy).
func (o *runOptions) registerLock(fs *flag.FlagSet, doing string) {
	fs.BoolFunc("lock", "hold each cluster's lock on its head host while "+doing+" (default true; -lock=false to skip)", func(v string) error {
		b, err := strconv.ParseBool(v)
		o.noLock = !b
		return err
	})
	fs.DurationVar(&o.lockTimeout, "lock-timeout", 0, "wait up to `DURATION` for a lock another rayform holds (default: fail at once)")
}

// apply runs the engine's apply (or destroy) and renders it.
func (s *session) apply(ctx context.Context, req run.ApplyRequest) int {
	req.OnInterrupt = s.c.setInterruptHandler
	if err := s.run.Apply(ctx, req, &applyView{s: s, destroy: req.Destroy}); err != nil {
		return exitError
	}
	return exitOK
}

// applyView renders an apply or a destroy (run.View) as text or NDJSON.
type applyView struct {
	s       *session
	destroy bool
}

var _ run.View = (*applyView)(nil)

func (v *applyView) op() string {
	if v.destroy {
		return "destroy"
	}
	return "apply"
}

func (v *applyView) Hooks() apply.Hooks { return v.s.hooks() }

func (v *applyView) Plan(obs *run.Observation) error {
	return renderPlan(v.s.c, v.s.opts, v.s, obs, "")
}

func (v *applyView) Confirm(ctx context.Context) bool { return v.s.confirm(ctx, v.destroy) }

func (v *applyView) Cancelled() {
	if v.destroy {
		fmt.Fprintln(v.s.c.stderr, "\nDestroy cancelled.")
	} else {
		fmt.Fprintln(v.s.c.stderr, "\nApply cancelled.")
	}
}

func (v *applyView) Interrupting() {
	fmt.Fprintln(v.s.c.stderr, "\nInterrupt received.\nPlease wait for rayform to exit or data loss may occur.\nGracefully shutting down...")
}

func (v *applyView) Error(err error) { fmt.Fprintf(v.s.c.stderr, "Error: %v\n", err) }

func (v *applyView) Failed(err error, interrupted bool) { v.s.reportFailure(err, interrupted, v.op()) }

func (v *applyView) NothingChanged() {
	fmt.Fprintf(v.s.c.stderr, "\nNothing was changed: rayform stops before removing or stopping anything when what it would start cannot start.\n")
}

func (v *applyView) LockLost(err error) { fmt.Fprintf(v.s.c.stderr, "\nError: %v\n", err) }

// Unreached tells, after a destroy, of every host it could not reach and
// the resources left there, which the state keeps.
func (v *applyView) Unreached(un []run.Unreach) {
	var lines []string
	nodes := map[string]bool{}
	for _, u := range un {
		lines = append(lines, fmt.Sprintf("%s on %s: %s", u.Address, u.Node, u.Why))
		nodes[u.Node] = true
	}
	fmt.Fprintf(v.s.c.stderr, "\nError: destroy could not reach every host; what these resources have there is left, and the state keeps them:\n  %s\n\nMake %s reachable, then run rayform destroy again.\n",
		strings.Join(lines, "\n  "), strings.Join(slices.Sorted(maps.Keys(nodes)), ", "))
}

func (v *applyView) Complete(counts plan.Counts, obs *run.Observation, changed bool) {
	c := v.s.c
	if !v.s.opts.json {
		verb := "Apply"
		if v.destroy {
			verb = "Destroy"
		}
		fmt.Fprintf(c.stdout, "\n%s complete! Resources: %d added, %d changed, %d destroyed.\n", verb, counts.Add, counts.Change, counts.Destroy)
		v.s.printOutputs(obs)
		return
	}
	if changed {
		e := plan.NewEvent(time.Now(), "info", "change_summary", fmt.Sprintf("Apply complete! Resources: %d added, %d changed, %d destroyed.", counts.Add, counts.Change, counts.Destroy))
		e["changes"] = map[string]any{"add": counts.Add, "change": counts.Change, "remove": counts.Destroy, "operation": "apply"}
		plan.WriteEvent(c.stdout, e)
	}
}

func (v *applyView) LockWaiting(resource string, held *lock.HeldError) {
	fmt.Fprintf(v.s.c.stderr, "Waiting up to %s for the lock of %s: %v\n", v.s.opts.lockTimeout, resource, held)
}

func (v *applyView) LockBroken(resource, host, record string) {
	fmt.Fprintf(v.s.c.stderr, "Warning: broke the stale lock of %s on %s (its holder %q stopped renewing it for more than %s)\n",
		resource, host, record, lock.DefaultLease)
}

func (v *applyView) LockSkipped(resource, host string, err error) {
	fmt.Fprintf(v.s.c.stderr, "Warning: could not take the lock of %s on %s, where the state recorded it: %v\n", resource, host, err)
}

// noPromptReason says why apply or destroy cannot ask for approval ("" when
// it can): -json owns stdout, -input=false forbids prompts.
func noPromptReason(opts *runOptions) string {
	switch {
	case opts.json:
		return "-json is set"
	case !opts.input:
		return "-input=false is set"
	}
	return ""
}

// confirm asks Terraform's question; only "yes" approves. An interrupt
// (ctx ends: the first Ctrl-C at the prompt, or a lost lock) answers no at
// once, without waiting for a line.
func (s *session) confirm(ctx context.Context, destroy bool) bool {
	c := s.c
	switch {
	case destroy && len(s.opts.targets) > 0:
		fmt.Fprint(c.stdout, "\nDo you really want to destroy the targeted resources?\n  rayform will destroy the resources shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	case destroy:
		fmt.Fprint(c.stdout, "\nDo you really want to destroy all resources?\n  rayform will destroy all the resources shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ")
	default:
		fmt.Fprint(c.stdout, "\nDo you want to perform these actions?\n  rayform will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	}
	answer := make(chan string, 1)
	go func() {
		// Left blocked on stdin after an interrupt: the process exits.
		line, err := bufio.NewReader(c.stdin).ReadString('\n')
		if err != nil && line == "" {
			fmt.Fprintln(c.stdout)
		}
		answer <- line
	}()
	select {
	case line := <-answer:
		return strings.TrimSpace(line) == "yes"
	case <-ctx.Done():
		fmt.Fprintln(c.stdout)
		return false
	}
}

// hooks renders apply progress as text or NDJSON.
func (s *session) hooks() apply.Hooks {
	if s.opts.json {
		return &jsonHooks{w: s.c.stdout, now: time.Now}
	}
	return newTextHooks(s.c.stdout, s.c.color)
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
func (s *session) reportFailure(err error, interrupted bool, op string) {
	c := s.c
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
		fmt.Fprintf(c.stderr, "\n╷\n│ Error: %s\n╵\n", strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n│ "))
	}
	if interrupted {
		msg := "Error: " + op + " interrupted"
		if len(cut) > 0 {
			msg += ":\n  " + strings.Join(cut, "\n  ")
		}
		fmt.Fprintf(c.stderr, "\n%s\n\nRun rayform %s again to finish.\n", msg, op)
	}
}

// printOutputs prints the outputs after a successful apply.
func (s *session) printOutputs(obs *run.Observation) {
	if len(obs.Result.Plan.Outputs) == 0 {
		return
	}
	fmt.Fprintf(s.c.stdout, "\nOutputs:\n\n")
	for _, o := range obs.Result.Plan.Outputs {
		v := "(sensitive value)"
		if !o.Sensitive {
			v = plan.FormatValue(o.Value)
		}
		fmt.Fprintf(s.c.stdout, "%s = %s\n", o.Name, v)
	}
}
