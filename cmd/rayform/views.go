package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/termtext"
)

// progressInterval is how often a running resource reports that it is
// still running, as Terraform does.
const progressInterval = 10 * time.Second

// verbs returns the progressive and completed forms of an action.
func verbs(a plan.Action) (doing, done, noun string) {
	switch a {
	case plan.Create:
		return "Creating", "Creation", "creating"
	case plan.Update:
		return "Modifying", "Modifications", "modifying"
	case plan.Replace:
		return "Replacing", "Replacement", "replacing"
	case plan.Delete:
		return "Destroying", "Destruction", "destroying"
	}
	return "Reading", "Read", "reading"
}

// textHooks renders apply progress for a person: Terraform's lines plus the
// steps and progress rayform knows about.
type textHooks struct {
	mu      sync.Mutex
	w       io.Writer
	color   bool
	now     func() time.Time
	tickers map[string]chan struct{}
	// interval is progressInterval; tests shorten it.
	interval time.Duration
}

func newTextHooks(w io.Writer, color bool) *textHooks {
	return &textHooks{w: w, color: color, now: time.Now, tickers: map[string]chan struct{}{}, interval: progressInterval}
}

func (h *textHooks) printf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(h.w, format, args...)
}

func (h *textHooks) bold(s string) string {
	if !h.color {
		return s
	}
	return termtext.Bold + s + termtext.Reset
}

func (h *textHooks) ResourceStart(addr string, a plan.Action) {
	doing, _, noun := verbs(a)
	h.printf("%s: %s...\n", h.bold(addr), doing)
	stop := make(chan struct{})
	h.mu.Lock()
	h.tickers[addr] = stop
	h.mu.Unlock()
	start := h.now()
	go func() {
		t := time.NewTicker(h.interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				h.printf("%s: Still %s... [%s elapsed]\n", h.bold(addr), noun, formatElapsed(h.now().Sub(start)))
			}
		}
	}()
}

func (h *textHooks) stopTicker(addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.tickers[addr]; ok {
		close(c)
		delete(h.tickers, addr)
	}
}

func (h *textHooks) StepStart(addr, step string) { h.printf("%s: %s\n", h.bold(addr), step) }
func (h *textHooks) StepSkipped(addr, step string) {
	h.printf("%s: %s (already done)\n", h.bold(addr), step)
}
func (h *textHooks) Progress(addr, msg string) { h.printf("%s: %s\n", h.bold(addr), msg) }

func (h *textHooks) ResourceComplete(addr string, a plan.Action, elapsed time.Duration) {
	h.stopTicker(addr)
	_, done, _ := verbs(a)
	h.printf("%s: %s complete after %s\n", h.bold(addr), done, formatElapsed(elapsed))
}

func (h *textHooks) ResourceErrored(addr string, a plan.Action, elapsed time.Duration, err error) {
	h.stopTicker(addr)
	h.printf("%s: %s\n", h.bold(addr), erroredLine(a, elapsed, err))
}

// erroredLine is the line of a resource whose steps stopped: failed, or,
// when the interrupt kept its next step from starting, stopped there with
// the steps before done (each reported as it finished, healthy or not).
func erroredLine(a plan.Action, elapsed time.Duration, err error) string {
	_, done, _ := verbs(a)
	var se *apply.StepError
	if errors.Is(err, apply.ErrInterrupted) && errors.As(err, &se) {
		return fmt.Sprintf("stopped by the interrupt after %s, before %q; the steps before it finished", formatElapsed(elapsed), se.Step)
	}
	return fmt.Sprintf("%s failed after %s", done, formatElapsed(elapsed))
}

// formatElapsed renders a duration the way Terraform does: "42s", "1m3s".
func formatElapsed(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
}

// jsonHooks renders apply progress as NDJSON events.
type jsonHooks struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

func (h *jsonHooks) emit(level, typ, msg string, fields map[string]any) {
	e := plan.NewEvent(h.now(), level, typ, msg)
	for k, v := range fields {
		e[k] = v
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = plan.WriteEvent(h.w, e)
}

func hookPayload(addr string, a plan.Action) map[string]any {
	return map[string]any{"resource": map[string]any{"addr": addr}, "action": string(a)}
}

func (h *jsonHooks) ResourceStart(addr string, a plan.Action) {
	doing, _, _ := verbs(a)
	h.emit("info", "apply_start", fmt.Sprintf("%s: %s...", addr, doing), map[string]any{"hook": hookPayload(addr, a)})
}

func (h *jsonHooks) StepStart(addr, step string) {
	p := hookPayload(addr, "")
	p["step"] = step
	h.emit("info", "apply_progress", fmt.Sprintf("%s: %s", addr, step), map[string]any{"hook": p})
}

func (h *jsonHooks) StepSkipped(addr, step string) {
	p := hookPayload(addr, "")
	p["step"] = step
	p["skipped"] = true
	h.emit("info", "apply_progress", fmt.Sprintf("%s: %s (already done)", addr, step), map[string]any{"hook": p})
}

func (h *jsonHooks) Progress(addr, msg string) {
	p := hookPayload(addr, "")
	p["message"] = msg
	h.emit("info", "apply_progress", fmt.Sprintf("%s: %s", addr, msg), map[string]any{"hook": p})
}

func (h *jsonHooks) ResourceComplete(addr string, a plan.Action, elapsed time.Duration) {
	_, done, _ := verbs(a)
	p := hookPayload(addr, a)
	p["elapsed_seconds"] = int(elapsed.Round(time.Second).Seconds())
	h.emit("info", "apply_complete", fmt.Sprintf("%s: %s complete after %s", addr, done, formatElapsed(elapsed)), map[string]any{"hook": p})
}

func (h *jsonHooks) ResourceErrored(addr string, a plan.Action, elapsed time.Duration, err error) {
	_, done, _ := verbs(a)
	p := hookPayload(addr, a)
	p["elapsed_seconds"] = int(elapsed.Round(time.Second).Seconds())
	p["error"] = err.Error()
	if errors.Is(err, apply.ErrInterrupted) {
		h.emit("warn", "apply_interrupted", addr+": "+erroredLine(a, elapsed, err), map[string]any{"hook": p})
		return
	}
	h.emit("error", "apply_errored", fmt.Sprintf("%s: %s failed after %s", addr, done, formatElapsed(elapsed)), map[string]any{"hook": p})
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

func (v *applyView) OrphansEnded(host, name string, gen uint64, ended []lock.Ended) {
	fmt.Fprint(v.s.c.stderr, orphansMessage(host, name, gen, ended))
}

// orphansMessage says what fencing a lock ended on a host: the commands an
// earlier rayform run (one killed, or cut off from the host) left running
// under the lock's fence there.
func orphansMessage(host, name string, gen uint64, ended []lock.Ended) string {
	var b strings.Builder
	fence := "" // unknown when the fence itself failed
	if gen > 0 {
		fence = fmt.Sprintf(", fence generation %d", gen)
	}
	fmt.Fprintf(&b, "Warning: ended on %s %d command(s) that an earlier rayform run (lock %q%s) left running there:\n", host, len(ended), name, fence)
	for _, e := range ended {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

func (v *applyView) LockSkipped(resource, host string, err error) {
	fmt.Fprintf(v.s.c.stderr, "Warning: could not take the lock of %s on %s, where the state recorded it: %v\n", resource, host, err)
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
