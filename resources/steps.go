package resources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/kind"
)

// Defaults of StepEnv's durations.
const (
	DefaultPoll             = 2 * time.Second
	DefaultRayReadyTimeout  = 3 * time.Minute
	DefaultServeTimeout     = 30 * time.Minute
	DefaultStopTimeout      = 30 * time.Second
	DefaultHTTPReadyTimeout = 2 * time.Minute
	DefaultProgressInterval = 2 * time.Second
	defaultParallelism      = 10
	// logTail is how many lines of each container log a diagnosis reads:
	// the root cause of a failure is printed well before its last lines.
	logTail = 400
	// serveLogTail is how many lines of the vllm serve log a diagnosis reads.
	serveLogTail = 2000
)

// StepEnv is what the apply steps need besides the work itself: a
// connection per node, the project, timings and what diagnose should know
// about the topology.
type StepEnv struct {
	// Conns are the open connections, by node name. Every node of the work
	// (including nodes a container is removed from) must have one.
	Conns map[string]transport.Conn
	// Project is the value of the rayform.project label.
	Project string
	// Poll is the interval between two reads of a condition that is not
	// met yet (Ray's node table, the serve log, /health); default
	// DefaultPoll.
	Poll time.Duration
	// RayReadyTimeout bounds the wait for Ray's node table to show the
	// declared nodes; default DefaultRayReadyTimeout.
	RayReadyTimeout time.Duration
	// StopTimeout bounds the wait for a stopped serve process to exit
	// before it is killed; default DefaultStopTimeout.
	StopTimeout time.Duration
	// HTTPReadyTimeout bounds the wait for /health once vLLM printed
	// "Application startup complete."; default DefaultHTTPReadyTimeout.
	HTTPReadyTimeout time.Duration
	// ProgressInterval throttles repetitive progress lines (image pulls,
	// progress bars); default DefaultProgressInterval.
	ProgressInterval time.Duration
	// Parallelism bounds the hosts worked on at once within one step
	// (pulls, worker starts); default 10.
	Parallelism int
	// Diagnose is the declared topology handed to diagnose.Classify; the
	// steps fill in the resource's own addresses, image and head.
	Diagnose diagnose.Context
	// Dataplane tunes the data-plane check before a serve starts (zero:
	// dataplane's defaults).
	Dataplane dataplane.Options
	// State records the images' answers to the architecture check, by
	// image ID; nil asks the image on every apply and records nothing.
	State *state.State
	// Checks start the ranks of data-plane checks ahead, as their
	// containers start; nil starts each check in its own step.
	Checks *CheckStarts
	// Prepared says that PrepareSteps ran before the walk (the image is
	// on every node that starts a container, and has Ray): Steps leaves
	// those steps out.
	Prepared bool
	// Log receives debug lines; nil discards them.
	Log hclog.Logger
	// Now and Sleep are the clock; nil means the real one. Tests inject a
	// fake so that deadlines pass without waiting.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// withDefaults returns a copy of e with every unset field defaulted.
func (e *StepEnv) withDefaults() *StepEnv {
	c := *e
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.RayReadyTimeout <= 0 {
		c.RayReadyTimeout = DefaultRayReadyTimeout
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.HTTPReadyTimeout <= 0 {
		c.HTTPReadyTimeout = DefaultHTTPReadyTimeout
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.Parallelism <= 0 {
		c.Parallelism = defaultParallelism
	}
	if c.Log == nil {
		c.Log = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleepCtx
	}
	return &c
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Steps returns the steps that carry out w, its kind's (kind.Kind.Steps):
// for a ray_cluster, remove the
// containers that must go (after re-checking their labels), make the image
// present, check that it has Ray, start the head and see it ALIVE under its
// fabric address in Ray's node table, check that every worker reaches the
// GCS, start the workers and verify the whole table; for a vllm_serve, stop
// the old process, start the new one following its log, and check /health,
// /v1/models and one completion. A failure carries the diagnosis of the
// logs involved.
func Steps(env *StepEnv, w *Work) []apply.Step {
	if w == nil || w.Action == plan.NoOp {
		return nil
	}
	k := KindOf(w.Type)
	if k == nil || w.Do == nil {
		return unsupported(w)
	}
	return k.Steps(env.withDefaults(), w)
}

// unsupported is the one step of work no kind can carry out: it fails.
func unsupported(w *Work) []apply.Step {
	return []apply.Step{{
		Name: "unsupported work",
		Run: func(context.Context, func(string)) error {
			return fmt.Errorf("%s: no steps for a %q resource with action %s", w.Address, w.Type, w.Action)
		},
	}}
}

// PrepareSteps are the steps of w that prove, before anything is removed
// or stopped, that what w creates can be created, and change nothing that
// runs (kind.Kind.PrepareSteps): for a ray_cluster that starts containers,
// the image on every node that starts one (pulled where missing, while the
// old containers keep running) and Ray in it. Apply runs them for every
// resource before its walk, whose Steps (with env.Prepared) then leave
// them out.
func PrepareSteps(env *StepEnv, w *Work) []apply.Step {
	if w == nil || w.Action == plan.NoOp {
		return nil
	}
	k := KindOf(w.Type)
	if k == nil || w.Do == nil {
		return nil
	}
	return k.PrepareSteps(env.withDefaults(), w)
}

// stepEnvOf is the StepEnv behind env: the kinds of this package read the
// whole of it (timeouts, the data-plane checks, diagnose's context); a
// kind in a package of its own sees only kind.Env.
func stepEnvOf(env kind.Env) *StepEnv { return env.(*StepEnv) }

// Conn is node's connection (kind.Env).
func (e *StepEnv) Conn(node string) transport.Conn { return e.Conns[node] }

// ProjectName is the project's label value (kind.Env).
func (e *StepEnv) ProjectName() string { return e.Project }

// Logger receives debug lines (kind.Env).
func (e *StepEnv) Logger() hclog.Logger { return e.Log }

// Clock is the time now (kind.Env).
func (e *StepEnv) Clock() time.Time { return e.Now() }

// Wait waits d or until ctx ends (kind.Env).
func (e *StepEnv) Wait(ctx context.Context, d time.Duration) error { return e.Sleep(ctx, d) }

// PollInterval is the time between two reads of a condition (kind.Env).
func (e *StepEnv) PollInterval() time.Duration { return e.Poll }

// MaxParallel bounds the hosts worked on at once (kind.Env).
func (e *StepEnv) MaxParallel() int { return e.Parallelism }

// ProgressEvery throttles repetitive progress lines (kind.Env).
func (e *StepEnv) ProgressEvery() time.Duration { return e.ProgressInterval }

// run runs cmd on node's connection.
func (e *StepEnv) run(ctx context.Context, node string, cmd transport.Cmd) (transport.Result, error) {
	conn := e.Conns[node]
	if conn == nil {
		return transport.Result{}, fmt.Errorf("%s: no connection to run %q", node, cmd.String())
	}
	return conn.Run(ctx, cmd)
}

// read runs a read-only argv on node.
func (e *StepEnv) read(ctx context.Context, node string, argv ...string) (transport.Result, error) {
	return e.run(ctx, node, transport.Cmd{Argv: argv})
}

// mutate runs a mutating argv on node.
func (e *StepEnv) mutate(ctx context.Context, node string, argv ...string) (transport.Result, error) {
	return e.run(ctx, node, transport.Cmd{Argv: argv, Mutating: true})
}

// errTimedOut is returned by poll when the deadline passes.
var errTimedOut = errors.New("timed out")

// poll calls f until it reports done or an error, waiting e.Poll between
// calls; after timeout it returns errTimedOut.
func (e *StepEnv) poll(ctx context.Context, timeout time.Duration, f func(ctx context.Context) (bool, error)) error {
	deadline := e.Now().Add(timeout)
	for {
		done, err := f(ctx)
		if err != nil || done {
			return err
		}
		if !e.Now().Before(deadline) {
			return errTimedOut
		}
		if err := e.Sleep(ctx, e.Poll); err != nil {
			return err
		}
	}
}

// forEach runs fn on every node, at most e.Parallelism at a time.
func (e *StepEnv) forEach(ctx context.Context, nodes []string, fn func(ctx context.Context, node string) error) error {
	return transport.ForEach(ctx, nodes, e.Parallelism, fn)
}

// isNoSuch reports whether err is docker's answer for a missing container
// or image, or for a container that does not run (docker exec).
func isNoSuch(err error) bool {
	var ee *transport.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	s := string(ee.Result.Stderr) + string(ee.Result.Stdout)
	return strings.Contains(s, "No such container") || strings.Contains(s, "No such object") ||
		strings.Contains(s, "No such image") || strings.Contains(s, "is not running")
}

// exitCode returns the exit code of a command that ran, -1 otherwise.
func exitCode(err error) int {
	var ee *transport.ExitError
	if errors.As(err, &ee) {
		return ee.Result.ExitCode
	}
	return -1
}

// syncProgress makes a progress callback safe for the goroutines of a
// parallel step and prefixes each line with its node when there are several.
func syncProgress(progress func(string), many bool) func(node, msg string) {
	var mu sync.Mutex
	return func(node, msg string) {
		mu.Lock()
		defer mu.Unlock()
		if many {
			msg = node + ": " + msg
		}
		progress(msg)
	}
}

// doneSet collects what parallel work finished, per node, to report it in
// node order once all of it is done.
type doneSet struct {
	mu    sync.Mutex
	lines map[string][]string
}

func newDoneSet() *doneSet { return &doneSet{lines: map[string][]string{}} }

func (d *doneSet) add(node, msg string) {
	d.mu.Lock()
	d.lines[node] = append(d.lines[node], msg)
	d.mu.Unlock()
}

// report hands the lines to progress, nodes sorted.
func (d *doneSet) report(progress func(string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range slices.Sorted(maps.Keys(d.lines)) {
		for _, l := range d.lines[n] {
			progress(l)
		}
	}
}

// describeNodes names nodes for a step name: all of them when few.
func describeNodes(nodes []string) string {
	if len(nodes) <= 4 {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%d nodes", len(nodes))
}

// logSource is one container log to read for a diagnosis.
type logSource struct {
	node, container, source string
}

// containerLogs reads `docker logs --tail N` (stdout and stderr) of each
// source, in parallel; an unreadable log becomes a note in its text.
func (e *StepEnv) containerLogs(ctx context.Context, srcs []logSource) []diagnose.Log {
	logs := make([]diagnose.Log, len(srcs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, e.Parallelism)
	for i, s := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			script := fmt.Sprintf("docker logs --tail %d %s 2>&1", logTail, shell.Quote(s.container))
			res, err := e.run(ctx, s.node, transport.Cmd{Script: script})
			text := res.Stdout
			if err != nil && len(text) == 0 {
				text = []byte("(rayform could not read this log: " + err.Error() + ")\n")
			}
			logs[i] = diagnose.Log{Host: s.node, Source: s.source, Text: text}
		}()
	}
	wg.Wait()
	return logs
}

// diagnosed returns err followed by the diagnosis of logs.
func diagnosed(err error, logs []diagnose.Log, dctx diagnose.Context) error {
	d := diagnose.Classify(diagnose.Input{Logs: logs, Context: dctx})
	return &DiagnosedError{Err: err, Diagnosis: d}
}

// DiagnosedError is a step failure together with the classified root cause
// read from the logs of the hosts involved.
type DiagnosedError struct {
	Err       error
	Diagnosis diagnose.Diagnosis
}

// Error is the failure, then the diagnosis (cause, evidence, fix).
func (e *DiagnosedError) Error() string {
	return e.Err.Error() + "\n" + strings.TrimRight(e.Diagnosis.Text(), "\n")
}

// Unwrap returns the failure.
func (e *DiagnosedError) Unwrap() error { return e.Err }

// throttle lets a repetitive progress line through at most once per
// interval, unless it starts a new phase or finishes one.
type throttle struct {
	now      func() time.Time
	interval time.Duration
	last     time.Time
	phase    string
}

// allow reports whether a line of phase should be shown now.
func (t *throttle) allow(phase string, final bool) bool {
	now := t.now()
	if phase != t.phase || final || t.last.IsZero() || now.Sub(t.last) >= t.interval {
		t.phase = phase
		t.last = now
		return true
	}
	return false
}

// lineWriter splits what is written into lines on \n or \r and hands each
// complete, non-empty line to fn.
type lineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(line string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexAny(string(w.buf), "\r\n")
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if line != "" {
			w.fn(line)
		}
	}
	return len(p), nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
