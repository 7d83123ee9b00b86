// Package stepenv is the environment of an apply's steps on the hosts:
// StepEnv, which the kinds that run containers (ray_cluster, vllm_serve)
// build from the run's kind.Env (New), with the timeouts, the data-plane
// checks started for the walk (OpenChecks) and diagnose's context those
// kinds read beyond it, and the helpers their steps share (running a
// command on a node, polling, parallel work, progress lines, reading
// container logs for a diagnosis).
package stepenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
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
	// ServeLogTail is how many lines of the vllm serve log a diagnosis reads.
	ServeLogTail = 2000
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
	// NotAtomic keeps a replacement that failed to become healthy as it
	// failed (apply -atomic=false); by default the step that started it
	// puts back what ran before.
	NotAtomic bool
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

// WithDefaults returns a copy of e with every unset field defaulted.
func (e *StepEnv) WithDefaults() *StepEnv {
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

// Diagnoser is implemented by a kind whose steps' failures are diagnosed
// from the hosts' logs: what the classifier needs to know about the
// resource at addr (its cluster's fabric, nodes and settings), for
// StepEnv.Diagnose.
type Diagnoser interface {
	DiagnoseContext(cfg *config.Config, facts *observe.Facts, addrs map[string]netip.Addr, addr string) diagnose.Context
}

// New is the StepEnv of the steps of the resource at addr of a container
// kind, from what the run gives them (env) and what diagnose should know
// of the resource, as its kind tells (d; an empty context where env has
// no configuration): the data-plane checks started for the walk
// (OpenChecks), the run's settings, and the defaults of the rest.
func New(env *kind.Env, d Diagnoser, addr string) *StepEnv {
	dctx := diagnose.Context{NodeAddrs: map[string]string{}, MgmtAddrs: map[string]string{}}
	if env.Config != nil {
		dctx = d.DiagnoseContext(env.Config, env.Facts, env.Fabric, addr)
	}
	e := &StepEnv{
		Conns:            env.Conns,
		Project:          env.Project,
		Poll:             env.Poll,
		RayReadyTimeout:  env.ReadyTimeout,
		ProgressInterval: env.ProgressInterval,
		Parallelism:      env.Parallelism,
		Diagnose:         dctx,
		State:            env.State,
		NotAtomic:        env.NotAtomic,
		Prepared:         env.Prepared,
		Log:              env.Log,
		Now:              env.Now,
		Sleep:            env.Sleep,
	}
	if cs, ok := env.Shared.Value(checksKey{}).(*CheckStarts); ok {
		e.Checks = cs
	}
	return e.WithDefaults()
}

// Run runs cmd on node's connection.
func (e *StepEnv) Run(ctx context.Context, node string, cmd transport.Cmd) (transport.Result, error) {
	conn := e.Conns[node]
	if conn == nil {
		return transport.Result{}, fmt.Errorf("%s: no connection to run %q", node, cmd.String())
	}
	return conn.Run(ctx, cmd)
}

// Read runs a read-only argv on node.
func (e *StepEnv) Read(ctx context.Context, node string, argv ...string) (transport.Result, error) {
	return e.Run(ctx, node, transport.Cmd{Argv: argv})
}

// Mutate runs a mutating argv on node.
func (e *StepEnv) Mutate(ctx context.Context, node string, argv ...string) (transport.Result, error) {
	return e.Run(ctx, node, transport.Cmd{Argv: argv, Mutating: true})
}

// ErrTimedOut is returned by PollUntil when the deadline passes.
var ErrTimedOut = errors.New("timed out")

// PollUntil calls f until it reports done or an error, waiting e.Poll between
// calls; after timeout it returns ErrTimedOut.
func (e *StepEnv) PollUntil(ctx context.Context, timeout time.Duration, f func(ctx context.Context) (bool, error)) error {
	deadline := e.Now().Add(timeout)
	for {
		done, err := f(ctx)
		if err != nil || done {
			return err
		}
		if !e.Now().Before(deadline) {
			return ErrTimedOut
		}
		if err := e.Sleep(ctx, e.Poll); err != nil {
			return err
		}
	}
}

// ForEach runs fn on every node, at most e.Parallelism at a time.
func (e *StepEnv) ForEach(ctx context.Context, nodes []string, fn func(ctx context.Context, node string) error) error {
	return transport.ForEach(ctx, nodes, e.Parallelism, fn)
}

// IsNoSuch reports whether err is docker's answer for a missing container
// or image, or for a container that does not run (docker exec).
func IsNoSuch(err error) bool {
	var ee *transport.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	s := string(ee.Result.Stderr) + string(ee.Result.Stdout)
	return strings.Contains(s, "No such container") || strings.Contains(s, "No such object") ||
		strings.Contains(s, "No such image") || strings.Contains(s, "is not running")
}

// ExitCode returns the exit code of a command that ran, -1 otherwise.
func ExitCode(err error) int {
	var ee *transport.ExitError
	if errors.As(err, &ee) {
		return ee.Result.ExitCode
	}
	return -1
}

// SyncProgress makes a progress callback safe for the goroutines of a
// parallel step and prefixes each line with its node when there are several.
func SyncProgress(progress func(string), many bool) func(node, msg string) {
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

// DoneSet collects what parallel work finished, per node, to report it in
// node order once all of it is done.
type DoneSet struct {
	mu    sync.Mutex
	lines map[string][]string
}

// NewDoneSet returns an empty DoneSet.
func NewDoneSet() *DoneSet { return &DoneSet{lines: map[string][]string{}} }

// Add records that msg finished on node.
func (d *DoneSet) Add(node, msg string) {
	d.mu.Lock()
	d.lines[node] = append(d.lines[node], msg)
	d.mu.Unlock()
}

// Report hands the lines to progress, nodes sorted.
func (d *DoneSet) Report(progress func(string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range slices.Sorted(maps.Keys(d.lines)) {
		for _, l := range d.lines[n] {
			progress(l)
		}
	}
}

// DescribeNodes names nodes for a step name: all of them when few.
func DescribeNodes(nodes []string) string {
	if len(nodes) <= 4 {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%d nodes", len(nodes))
}

// LogSource is one container log to read for a diagnosis.
type LogSource struct {
	Node, Container, Source string
}

// ContainerLogs reads `docker logs --tail N` (stdout and stderr) of each
// source, in parallel; an unreadable log becomes a note in its text.
func (e *StepEnv) ContainerLogs(ctx context.Context, srcs []LogSource) []diagnose.Log {
	logs := make([]diagnose.Log, len(srcs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, e.Parallelism)
	for i, s := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			script := fmt.Sprintf("docker logs --tail %d %s 2>&1", logTail, shell.Quote(s.Container))
			res, err := e.Run(ctx, s.Node, transport.Cmd{Script: script})
			text := res.Stdout
			if err != nil && len(text) == 0 {
				text = []byte("(rayform could not read this log: " + err.Error() + ")\n")
			}
			logs[i] = diagnose.Log{Host: s.Node, Source: s.Source, Text: text}
		}()
	}
	wg.Wait()
	return logs
}

// Diagnosed returns err followed by the diagnosis of logs.
func Diagnosed(err error, logs []diagnose.Log, dctx diagnose.Context) error {
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

// Throttle lets a repetitive progress line through at most once per
// interval, unless it starts a new phase or finishes one.
type Throttle struct {
	now      func() time.Time
	interval time.Duration
	last     time.Time
	phase    string
}

// NewThrottle lets a line through at most once per interval, by the
// clock now.
func NewThrottle(now func() time.Time, interval time.Duration) Throttle {
	return Throttle{now: now, interval: interval}
}

// Allow reports whether a line of phase should be shown now.
func (t *Throttle) Allow(phase string, final bool) bool {
	now := t.now()
	if phase != t.phase || final || t.last.IsZero() || now.Sub(t.last) >= t.interval {
		t.phase = phase
		t.last = now
		return true
	}
	return false
}

// LineWriter splits what is written into lines on \n or \r and hands each
// complete, non-empty line to fn.
type LineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(line string)
}

// NewLineWriter hands each complete, non-empty line written to fn.
func NewLineWriter(fn func(line string)) *LineWriter { return &LineWriter{fn: fn} }

// Write splits p into lines, keeping an incomplete last one for the next
// write.
func (w *LineWriter) Write(p []byte) (int, error) {
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

// SortedSet returns the keys of m set to true, sorted.
func SortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// HTTPAnswer splits curl's output into the body and the -w line.
func HTTPAnswer(out []byte) ([]byte, string) {
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndex(s, "\n")
	if i < 0 {
		return nil, strings.TrimSpace(s)
	}
	return []byte(s[:i]), strings.TrimSpace(s[i+1:])
}

// PortHolder names the process listening on port on node ("pid 4121
// (python3)"), or "" when the probe cannot tell. The containers share the
// host's network, so the host's ss sees their sockets.
func PortHolder(ctx context.Context, e *StepEnv, node string, port int) string {
	res, err := e.Read(ctx, node, "ss", "-Hltnp", "sport = :"+strconv.Itoa(port))
	if err != nil {
		return ""
	}
	for _, l := range observe.ParseListeners(string(res.Stdout), map[int]bool{port: true}) {
		if l.PID > 0 {
			return "pid " + strconv.Itoa(l.PID) + " (" + l.Process + ")"
		}
	}
	return ""
}
