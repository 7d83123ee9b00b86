package views

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/plan"
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
