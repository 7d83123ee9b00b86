package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/stepenv"
)

// serveRun is what the steps of one vllm_serve share, passed to each
// step's constructor: the environment, the work and the serve's spec, and
// the helpers that ask the head about the serve. What a step learns stays
// in its own fields; two facts pass between steps through the work
// (ServeWork), because the steps that write and read them may be built by
// different calls (the stop runs ahead, in a part of its own): stoppedAt
// (the stop step's, read by a failed start's restore) and Arch (the model
// check's, read by the architecture check).
type serveRun struct {
	e    *stepenv.StepEnv
	w    *kind.Work
	s    *ServeWork
	spec ServeSpec
}

// newServeRun is what the steps of w share.
func newServeRun(e *stepenv.StepEnv, w *kind.Work) *serveRun {
	return &serveRun{e: e, w: w, s: WorkOf(w), spec: WorkOf(w).Spec}
}

// serveSteps are the steps of a serve's work, in order: check the staged
// model (read-only, before the running serve stops), stop the running
// serve, then either forget it (delete) or check the model's architecture
// against the image, check the data plane, start the serve and test a
// completion.
func serveSteps(e *stepenv.StepEnv, w *kind.Work) []apply.Step {
	r := newServeRun(e, w)
	if r.s.BlueGreen && r.s.Start {
		return blueGreenSteps(r)
	}
	var steps []apply.Step
	if r.s.Stop {
		steps = append(steps, newStopStep(r), stopFrontStep{r})
	}
	if w.Action == plan.Delete || !r.s.Start {
		return append(steps, newForgetStep(r))
	}
	if r.s.Model != nil {
		// Read-only: it runs before the running serve is stopped.
		steps = append([]apply.Step{newModelCheckStep(r)}, steps...)
	}
	if r.s.Arch != nil || r.s.Model != nil {
		steps = append(steps, newArchStep(r))
	}
	if len(r.s.Check) > 0 {
		steps = append(steps, newDataplaneStep(r))
	}
	return append(steps, newStartStep(r), newCompletionStep(r))
}

// ServeStopSteps are the steps that stop w's serve process, alone: apply
// runs them before its cluster's containers change (a worker under a
// pipeline-parallel serve must not go away under a running serve), then
// Steps(w), whose stop step then finds the process gone.
func ServeStopSteps(env *stepenv.StepEnv, w *kind.Work) []apply.Step {
	if w == nil || WorkOf(w) == nil || !WorkOf(w).Stop {
		return nil
	}
	return []apply.Step{newStopStep(newServeRun(env.WithDefaults(), w))}
}

// AwaitSteps are the steps that see a running serve still starting
// through to ready (awaitStep). Apply runs them for every serve of the
// configuration that runs but does not answer yet, changed or not: it
// reports success only for serves that serve.
func AwaitSteps(env *stepenv.StepEnv, w *kind.Work) []apply.Step {
	if w == nil || WorkOf(w) == nil {
		return nil
	}
	return []apply.Step{newAwaitStep(newServeRun(env.WithDefaults(), w))}
}

// node is the head node the serve runs on.
func (r *serveRun) node() string { return r.spec.Node }

// exec runs a shell script inside the head container.
func (r *serveRun) exec(ctx context.Context, script string, mutating bool) (transport.Result, error) {
	return r.e.Run(ctx, r.node(), transport.Cmd{Argv: []string{"docker", "exec", r.spec.Container, "sh", "-c", script}, Mutating: mutating})
}

// pidStateScript prints "none", "dead PID" or "alive PID" for the serve
// process; before its pid file exists it prints "starting" instead of
// "none" when starting is set.
func (r *serveRun) pidStateScript(none string) string {
	return fmt.Sprintf(`p=%s; if [ ! -f "$p" ]; then echo %s; elif kill -0 "$(cat "$p")" 2>/dev/null; then echo alive "$(cat "$p")"; else echo dead "$(cat "$p")"; fi`,
		shell.Quote(r.spec.pidPath()), none)
}

// state reports the serve process's state: "none" (no record, or no head
// container), "dead" or "alive", and its pid.
func (r *serveRun) state(ctx context.Context) (string, string, error) {
	res, err := r.exec(ctx, r.pidStateScript("none"), false)
	if err != nil {
		if stepenv.IsNoSuch(err) {
			return "none", "", nil
		}
		return "", "", fmt.Errorf("reading the serve pid on %s: %w", r.node(), err)
	}
	state, pid, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	return state, pid, nil
}

// url is the serve's endpoint as the head reaches it (ServeSpec.LocalURL).
func (r *serveRun) url(path string) string { return r.spec.LocalURL(path) }

// curl runs curl on the head host; the API key, if any, goes as a header
// read from stdin, never on the command line.
func (r *serveRun) curl(ctx context.Context, args ...string) (transport.Result, error) {
	argv := []string{"curl", "-sS"}
	cmd := transport.Cmd{}
	if key := r.spec.apiKey(); key != "" {
		argv = append(argv, "-H", "@-")
		cmd.Stdin = strings.NewReader("Authorization: Bearer " + key + "\n")
	}
	cmd.Argv = append(argv, args...)
	res, err := r.e.Run(ctx, r.node(), cmd)
	if stepenv.ExitCode(err) == 127 {
		return res, fmt.Errorf("curl is not installed on %s; rayform checks vLLM's endpoints with it (apt-get install curl): %w", r.node(), err)
	}
	return res, err
}

// verifyHTTP waits for /health 200, then checks /v1/models.
func (r *serveRun) verifyHTTP(ctx context.Context) error {
	last := ""
	err := r.e.PollUntil(ctx, r.e.HTTPReadyTimeout, func(ctx context.Context) (bool, error) {
		res, err := r.curl(ctx, "-o", "/dev/null", "-w", "%{http_code}", "-m", "5", r.url("/health"))
		code := strings.TrimSpace(string(res.Stdout))
		if code == "200" {
			return true, nil
		}
		if stepenv.ExitCode(err) == 127 {
			return false, err
		}
		last = "HTTP " + code
		if msg := strings.TrimSpace(string(res.Stderr)); msg != "" {
			last = msg
		}
		return false, nil
	})
	if errors.Is(err, stepenv.ErrTimedOut) {
		err = fmt.Errorf("vLLM's /health on %s did not answer 200 within %s (last: %s)", r.node(), r.e.HTTPReadyTimeout, last)
	}
	if err != nil {
		return r.diagnose(ctx, err)
	}
	res, err := r.curl(ctx, "-m", "10", "-w", "\\n%{http_code}", r.url("/v1/models"))
	if err != nil {
		return fmt.Errorf("GET /v1/models on %s: %w", r.node(), err)
	}
	body, code := stepenv.HTTPAnswer(res.Stdout)
	if code != "200" {
		return fmt.Errorf("GET /v1/models on %s answered HTTP %s: %s", r.node(), code, shortBody(body))
	}
	var models struct {
		Data []Model `json:"data"`
	}
	if err := json.Unmarshal(body, &models); err != nil {
		return fmt.Errorf("GET /v1/models on %s: %w: %s", r.node(), err, shortBody(body))
	}
	if d := judgeModels(models.Data, r.spec, " on "+r.node()); d != "" {
		return errors.New(d)
	}
	return nil
}

func shortBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// apiKey is the key vLLM requires on /v1 routes (--api-key or
// VLLM_API_KEY), "" when none.
func (s ServeSpec) apiKey() string {
	for i, a := range s.Args {
		if v, ok := strings.CutPrefix(a, "--api-key="); ok {
			return v
		}
		if a == "--api-key" && i+1 < len(s.Args) {
			return s.Args[i+1]
		}
	}
	return s.Env["VLLM_API_KEY"]
}

// diagnose is diagnoseStart for a failure after the serve started.
func (r *serveRun) diagnose(ctx context.Context, err error) error {
	return r.diagnoseStart(ctx, err, launch{})
}

// diagnoseStart reads the serve log (its last stepenv.ServeLogTail lines)
// and the cluster's container logs, and returns err with the root cause;
// l says how a start ended.
func (r *serveRun) diagnoseStart(ctx context.Context, err error, l launch) error {
	return r.diagnoseLog(ctx, err, l, r.spec.LogPath(), "vllm serve log")
}

// diagnoseLog is diagnoseStart on the log at path of the head container
// (the serve's, or its front's), named source.
func (r *serveRun) diagnoseLog(ctx context.Context, err error, l launch, path, source string) error {
	if ctx.Err() != nil {
		// Cancelled (an interrupt, a lost lock): no failure to classify.
		return err
	}
	node, c := r.node(), r.spec.Container
	var logs []diagnose.Log
	res, rerr := r.e.Read(ctx, node, "docker", "exec", c, "tail", "-n", strconv.Itoa(stepenv.ServeLogTail), path)
	text := res.Stdout
	if rerr != nil && len(text) == 0 {
		text = []byte("(rayform could not read this log: " + rerr.Error() + ")\n")
	}
	logs = append(logs, diagnose.Log{Host: node, Source: source, Text: text})
	srcs := []stepenv.LogSource{{Node: node, Container: c, Source: "ray head container"}}
	nodes, known := r.s.ClusterNodes, r.s.ClusterNodes != nil
	if !known {
		nodes = slices.Sorted(maps.Keys(r.e.Conns))
	}
	for _, n := range nodes {
		if n != node {
			srcs = append(srcs, stepenv.LogSource{Node: n, Container: c, Source: "ray worker container"})
		}
	}
	for i, l := range r.e.ContainerLogs(ctx, srcs) {
		if !known && i > 0 && bytes.HasPrefix(l.Text, []byte("(rayform could not read")) {
			continue
		}
		logs = append(logs, l)
	}
	d := r.e.Diagnose
	if d.Serve == "" {
		d.Serve = r.w.Address
	}
	if d.HeadNode == "" {
		d.HeadNode = node
	}
	d.ServePort = r.spec.Port
	d.ReadyTimeout = l.readyTimeout
	d.ProcessExited = l.exited
	// What the log alone cannot say, asked of the host where it matters.
	if bytes.Contains(text, []byte("already in use")) || bytes.Contains(text, []byte("Errno 98")) {
		if holder := stepenv.PortHolder(ctx, r.e, node, r.spec.Port); holder != "" {
			d.PortHolders = map[int]string{r.spec.Port: holder}
		}
	}
	if bytes.Contains(text, []byte(": error: ")) && d.VLLMVersion == "" {
		d.VLLMVersion = r.vllmVersion(ctx, node, c)
	}
	return stepenv.Diagnosed(err, logs, d)
}

// vllmVersionRE is `vllm --version`'s answer.
var vllmVersionRE = regexp.MustCompile(`(?m)^(\d+\.\d+(?:\.\d+)?\S*)\s*$`)

// vllmVersion asks the image's vLLM for its version ("" when it cannot).
func (r *serveRun) vllmVersion(ctx context.Context, node, container string) string {
	res, err := r.e.Read(ctx, node, "docker", "exec", container, "vllm", "--version")
	if err != nil {
		return ""
	}
	if m := vllmVersionRE.FindStringSubmatch(string(res.Stdout)); m != nil {
		return m[1]
	}
	return ""
}
