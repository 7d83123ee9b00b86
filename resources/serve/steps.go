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
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/termtext"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/hostenv"
	"github.com/rayform/rayform/resources/kind"
)

// completionMaxTokens is the size of the smoke-test completion.
const completionMaxTokens = 16

// completionPrompt is the smoke-test prompt.
const completionPrompt = "The capital of France is"

// serveRun is what the steps of one vllm_serve share.
type serveRun struct {
	e    *hostenv.StepEnv
	w    *kind.Work
	s    *ServeWork
	spec ServeSpec
	// readyTimeout and exited say how the start ended, for the diagnosis:
	// rayform stopped waiting after readyTimeout, or found the process gone.
	readyTimeout time.Duration
	exited       bool
	// loaded is how long the start took, exec to /health 200.
	loaded time.Duration
	// owner is the SSH user's uid, given the serve's files ("" unknown).
	owner string
}

func serveSteps(e *hostenv.StepEnv, w *kind.Work) []apply.Step {
	r := &serveRun{e: e, w: w, s: WorkOf(w), spec: WorkOf(w).Spec}
	if r.s.BlueGreen && r.s.Start {
		return blueGreenSteps(r)
	}
	var steps []apply.Step
	if r.s.Stop {
		steps = append(steps, r.stopStep(), stopFrontStep{r}.step())
	}
	if w.Action == plan.Delete || !r.s.Start {
		return append(steps, r.forgetStep())
	}
	if r.s.Model != nil {
		// Read-only: it runs before the running serve is stopped.
		steps = append([]apply.Step{r.modelCheckStep()}, steps...)
	}
	if r.s.Arch != nil || r.s.Model != nil {
		steps = append(steps, r.archStep())
	}
	if len(r.s.Check) > 0 {
		steps = append(steps, r.dataplaneStep())
	}
	return append(steps, r.startStep(), r.completionStep())
}

// ServeStopSteps are the steps that stop w's serve process, alone: apply
// runs them before its cluster's containers change (a worker under a
// pipeline-parallel serve must not go away under a running serve), then
// Steps(w), whose stop step then finds the process gone.
func ServeStopSteps(env *hostenv.StepEnv, w *kind.Work) []apply.Step {
	if w == nil || WorkOf(w) == nil || !WorkOf(w).Stop {
		return nil
	}
	r := &serveRun{e: env.WithDefaults(), w: w, s: WorkOf(w), spec: WorkOf(w).Spec}
	return []apply.Step{r.stopStep()}
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
		if hostenv.IsNoSuch(err) {
			return "none", "", nil
		}
		return "", "", fmt.Errorf("reading the serve pid on %s: %w", r.node(), err)
	}
	state, pid, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	return state, pid, nil
}

// stopStep stops a running serve process: SIGTERM, wait, then SIGKILL.
func (r *serveRun) stopStep() apply.Step {
	return apply.Step{
		Name: fmt.Sprintf("stop vllm serve %s on %s", r.spec.Name, r.node()),
		Check: func(ctx context.Context) (bool, error) {
			st, _, err := r.state(ctx)
			return st != "alive", err
		},
		Run: func(ctx context.Context, progress func(string)) error {
			if r.s.stoppedAt.IsZero() {
				r.s.stoppedAt = r.e.Now()
			}
			for _, sig := range []string{"TERM", "KILL"} {
				// SIGCONT after it: a stopped (hung) process only acts on
				// SIGTERM once continued.
				script := fmt.Sprintf(`kill -%s "$(cat %s)" 2>/dev/null; kill -CONT "$(cat %[2]s)" 2>/dev/null; true`, sig, shell.Quote(r.spec.pidPath()))
				if _, err := r.exec(ctx, script, true); err != nil {
					if hostenv.IsNoSuch(err) {
						return nil
					}
					return fmt.Errorf("signalling vllm serve %s on %s: %w", r.spec.Name, r.node(), err)
				}
				var pid string
				err := r.e.PollUntil(ctx, r.e.StopTimeout, func(ctx context.Context) (bool, error) {
					st, p, err := r.state(ctx)
					pid = p
					return st != "alive", err
				})
				if err == nil {
					progress(fmt.Sprintf("stopped vllm serve %s (SIG%s)", r.spec.Name, sig))
					return nil
				}
				if !errors.Is(err, hostenv.ErrTimedOut) {
					return err
				}
				progress(fmt.Sprintf("vllm serve %s (pid %s) still runs %s after SIG%s", r.spec.Name, pid, r.e.StopTimeout, sig))
			}
			return fmt.Errorf("vllm serve %s on %s does not exit, even after SIGKILL", r.spec.Name, r.node())
		},
	}
}

// forgetStep removes the serve's record and pid (and an older version's
// env file) so that nothing claims the process any more (they live in the
// host directory the head container mounts, see ServeHostDir; the lock file
// stays, as in start).
func (r *serveRun) forgetStep() apply.Step {
	return apply.Step{
		Name: fmt.Sprintf("remove the record of vllm serve %s on %s", r.spec.Name, r.node()),
		Run: func(ctx context.Context, progress func(string)) error {
			_, err := r.e.Mutate(ctx, r.node(), "docker", "exec", r.spec.Container, "rm", "-f", r.spec.specPath(), r.spec.pidPath(), r.spec.envPath())
			if err != nil && !hostenv.IsNoSuch(err) {
				return fmt.Errorf("removing the record of vllm serve %s on %s: %w", r.spec.Name, r.node(), err)
			}
			return nil
		},
	}
}

// startStep starts vllm serve, follows its log into progress lines until
// "Application startup complete." and verifies /health and /v1/models; a
// start that does not get there is stopped and, unless apply runs with
// -atomic=false, the serve that ran before is put back (failStart).
func (r *serveRun) startStep() apply.Step {
	return apply.Step{
		Name: fmt.Sprintf("start vllm serve %s on %s", r.spec.Name, r.node()),
		Run: func(ctx context.Context, progress func(string)) error {
			began := r.e.Now()
			err := r.start(ctx, progress)
			if err == nil {
				err = r.verifyHTTP(ctx)
			}
			if err != nil {
				return r.failStart(ctx, err, progress)
			}
			r.loaded = r.e.Now().Sub(began)
			// It answers: the serve to put back if a later change fails
			// (recorded here, not after the test completion, so that an
			// interrupt before that step still records it).
			return r.keepGood(ctx, r.loaded)
		},
		// Run waited for the answer (a start that does not answer is a
		// failed start, which Run handles: failStart); Verify reads it
		// back once more, as every step's postcondition.
		Verify: r.verifyHTTP,
	}
}

func (r *serveRun) start(ctx context.Context, progress func(string)) error {
	node, c := r.node(), r.spec.Container
	if r.spec.ListenHost() == "" {
		// Without --host vLLM would listen on every address: never by
		// accident (the head's fabric address was not observed).
		return fmt.Errorf("%s: the head's fabric address is not known, so vLLM cannot be told to listen there (listen = %q); run rayform apply again", r.spec.Resource, ListenFabric)
	}
	// A previous log or pid must not be mistaken for the new process's;
	// the log is kept as the previous one (logs -previous, diagnose),
	// never overwritten: it may explain why this start happens. The lock
	// file stays: a serve of the same name still exiting holds it, and the
	// new one must wait on that same file (see StartScript).
	if _, err := r.e.Mutate(ctx, node, "docker", "exec", c, "sh", "-c", r.spec.rotateLogScript()); err != nil {
		return fmt.Errorf("keeping the old serve log on %s as the previous one: %w", node, err)
	}
	// The log is 0600, given to the SSH user (see ExecArgs).
	owner := ""
	if res, err := r.e.Run(ctx, node, transport.Cmd{Argv: []string{"id", "-u"}}); err == nil {
		if id := strings.TrimSpace(string(res.Stdout)); id != "" && strings.Trim(id, "0123456789") == "" {
			owner = id
		}
	}
	r.owner = owner
	if _, err := r.e.Run(ctx, node, transport.Cmd{Argv: r.spec.ExecArgs(owner), Env: r.spec.SecretEnvValues(), Mutating: true}); err != nil {
		return fmt.Errorf("starting vllm serve %s on %s: %w", r.spec.Name, node, err)
	}
	return r.follow(ctx, progress)
}

// follow reads the serve's log into progress lines until vLLM prints
// "Application startup complete.", fails, exits, or ready_timeout runs
// out; a failure carries its diagnosis.
func (r *serveRun) follow(ctx context.Context, progress func(string)) error {
	node, c := r.node(), r.spec.Container
	timeout := r.s.ReadyTimeout
	if timeout <= 0 {
		timeout = hostenv.DefaultServeTimeout
	}
	p := newServeProgress(progress, hostenv.NewThrottle(r.e.Now, r.e.ProgressInterval))
	offset := 0
	err := r.e.PollUntil(ctx, timeout, func(ctx context.Context) (bool, error) {
		script := r.pidStateScript("starting") + fmt.Sprintf("; tail -c +%d %s 2>/dev/null; true", offset+1, shell.Quote(r.spec.LogPath()))
		res, err := r.exec(ctx, script, false)
		if err != nil {
			if hostenv.IsNoSuch(err) {
				return false, fmt.Errorf("the head container %s on %s stopped while vllm serve %s was starting: %w", c, node, r.spec.Name, err)
			}
			return false, fmt.Errorf("reading the log of vllm serve %s on %s: %w", r.spec.Name, node, err)
		}
		status, rest, _ := bytes.Cut(res.Stdout, []byte("\n"))
		offset += len(rest)
		p.feed(rest)
		state, pid, _ := strings.Cut(strings.TrimSpace(string(status)), " ")
		switch {
		case p.up:
			return true, nil
		case p.fatal != "":
			p.failed()
			return false, fmt.Errorf("vllm serve %s failed on %s: %s", r.spec.Name, node, p.fatal)
		case state == "dead":
			p.failed()
			r.exited = true
			return false, fmt.Errorf("vllm serve %s (pid %s) exited on %s before it was ready", r.spec.Name, pid, node)
		}
		return false, nil
	})
	if errors.Is(err, hostenv.ErrTimedOut) {
		p.failed()
		err = fmt.Errorf("vllm serve %s on %s is not ready after %s (ready_timeout)", r.spec.Name, node, timeout)
		r.readyTimeout = timeout
	}
	if err != nil {
		return r.diagnose(ctx, err)
	}
	return nil
}

// AwaitSteps are the steps that see a running serve still starting
// through to ready: follow its log (from its start, so the progress so far
// is shown) until vLLM is up or ready_timeout runs out, then check
// /health and /v1/models. Apply runs them for every serve of the
// configuration that runs but does not answer yet, changed or not: it
// reports success only for serves that serve.
func AwaitSteps(env *hostenv.StepEnv, w *kind.Work) []apply.Step {
	if w == nil || WorkOf(w) == nil {
		return nil
	}
	r := &serveRun{e: env.WithDefaults(), w: w, s: WorkOf(w), spec: WorkOf(w).Spec}
	return []apply.Step{{
		Name:   fmt.Sprintf("wait for vllm serve %s on %s to be ready (ready_timeout %s)", r.spec.Name, r.node(), r.readyTimeoutValue()),
		Run:    r.follow,
		Verify: r.verifyHTTP,
	}}
}

// readyTimeoutValue is the serve's ready_timeout, or the default.
func (r *serveRun) readyTimeoutValue() time.Duration {
	if r.s.ReadyTimeout > 0 {
		return r.s.ReadyTimeout
	}
	return hostenv.DefaultServeTimeout
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
	if hostenv.ExitCode(err) == 127 {
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
		if hostenv.ExitCode(err) == 127 {
			return false, err
		}
		last = "HTTP " + code
		if msg := strings.TrimSpace(string(res.Stderr)); msg != "" {
			last = msg
		}
		return false, nil
	})
	if errors.Is(err, hostenv.ErrTimedOut) {
		err = fmt.Errorf("vLLM's /health on %s did not answer 200 within %s (last: %s)", r.node(), r.e.HTTPReadyTimeout, last)
	}
	if err != nil {
		return r.diagnose(ctx, err)
	}
	res, err := r.curl(ctx, "-m", "10", "-w", "\\n%{http_code}", r.url("/v1/models"))
	if err != nil {
		return fmt.Errorf("GET /v1/models on %s: %w", r.node(), err)
	}
	body, code := hostenv.HTTPAnswer(res.Stdout)
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

// completionStep sends one small completion and reports tokens per second.
func (r *serveRun) completionStep() apply.Step {
	return apply.Step{
		Name: fmt.Sprintf("test a completion of %s on %s", r.spec.ServedName, r.node()),
		Run: func(ctx context.Context, progress func(string)) error {
			body, _ := json.Marshal(map[string]any{"model": r.spec.ServedName, "prompt": completionPrompt,
				"max_tokens": completionMaxTokens, "temperature": 0})
			res, err := r.curl(ctx, "-m", "300", "-w", "\\n%{http_code} %{time_total}",
				"-H", "Content-Type: application/json", "-d", string(body), r.url("/v1/completions"))
			if err != nil {
				return fmt.Errorf("POST /v1/completions on %s: %w", r.node(), err)
			}
			out, tail := hostenv.HTTPAnswer(res.Stdout)
			code, total, _ := strings.Cut(tail, " ")
			if code != "200" {
				return r.diagnose(ctx, fmt.Errorf("POST /v1/completions on %s answered HTTP %s: %s", r.node(), code, shortBody(out)))
			}
			var resp struct {
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(out, &resp); err != nil {
				return fmt.Errorf("POST /v1/completions on %s: %w: %s", r.node(), err, shortBody(out))
			}
			secs, _ := strconv.ParseFloat(total, 64)
			n := resp.Usage.CompletionTokens
			if secs > 0 {
				progress(fmt.Sprintf("completion: %d tokens in %.2fs (%.1f tokens/s)", n, secs, float64(n)/secs))
			} else {
				progress(fmt.Sprintf("completion: %d tokens", n))
			}
			return nil
		},
	}
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

// diagnose reads the serve log (its last hostenv.ServeLogTail lines) and the
// cluster's container logs, and returns err with the root cause.
func (r *serveRun) diagnose(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		// Cancelled (an interrupt, a lost lock): no failure to classify.
		return err
	}
	node, c := r.node(), r.spec.Container
	var logs []diagnose.Log
	res, rerr := r.e.Read(ctx, node, "docker", "exec", c, "tail", "-n", strconv.Itoa(hostenv.ServeLogTail), r.spec.LogPath())
	text := res.Stdout
	if rerr != nil && len(text) == 0 {
		text = []byte("(rayform could not read this log: " + rerr.Error() + ")\n")
	}
	logs = append(logs, diagnose.Log{Host: node, Source: "vllm serve log", Text: text})
	srcs := []hostenv.LogSource{{Node: node, Container: c, Source: "ray head container"}}
	nodes, known := r.s.ClusterNodes, r.s.ClusterNodes != nil
	if !known {
		nodes = slices.Sorted(maps.Keys(r.e.Conns))
	}
	for _, n := range nodes {
		if n != node {
			srcs = append(srcs, hostenv.LogSource{Node: n, Container: c, Source: "ray worker container"})
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
	d.ReadyTimeout = r.readyTimeout
	d.ProcessExited = r.exited
	// What the log alone cannot say, asked of the host where it matters.
	if bytes.Contains(text, []byte("already in use")) || bytes.Contains(text, []byte("Errno 98")) {
		if holder := hostenv.PortHolder(ctx, r.e, node, r.spec.Port); holder != "" {
			d.PortHolders = map[int]string{r.spec.Port: holder}
		}
	}
	if bytes.Contains(text, []byte(": error: ")) && d.VLLMVersion == "" {
		d.VLLMVersion = r.vllmVersion(ctx, node, c)
	}
	return hostenv.Diagnosed(err, logs, d)
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

// Progress lines of vLLM's startup (reference §3.6).
var (
	weightsRE  = regexp.MustCompile(`Loading (\w+) checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)`)
	graphsRE   = regexp.MustCompile(`(Capturing CUDA graphs[^:]*):\s*(\d+)%\|[^|]*\|\s*(\d+)/(\d+)`)
	vllmPrefix = regexp.MustCompile(`^(?:\([^)]*\)\s*)*(?:(?:INFO|WARNING|ERROR|DEBUG)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s*|INFO:\s+)?`)
)

// serveMilestones are the startup lines shown as they are, in order of
// appearance.
var serveMilestones = []string{
	"Starting to load model",
	"Loading weights took",
	"Model loading took",
	"Available KV cache memory",
	"GPU KV cache size",
	"Graph capturing finished",
	"init engine",
	"Starting vLLM API server",
	"Application startup complete.",
}

// serveFatal are lines after which vLLM never becomes ready.
var serveFatal = []string{
	"Engine core initialization failed",
	"EngineCore failed to start",
	"EngineDeadError",
}

// serveProgress turns vLLM's log into progress lines: a weight-loading bar,
// CUDA graph capture, milestones; it notes readiness and fatal lines.
// Known-harmless lines — c10d's first refused connection (the master is not
// listening yet; torch prints a garbage IPv6 address in it) and every rank's
// repeat of a milestone — are held back and shown only if the start fails.
// Bars complete before the milestone that ends them.
type serveProgress struct {
	progress func(string)
	throttle hostenv.Throttle
	buf      []byte
	seen     map[string]bool
	held     []string
	// bars maps a bar's phase to its last state, for completing it.
	bars  map[string]barState
	up    bool
	fatal string
}

// barState is the last line seen of one progress bar.
type barState struct {
	total int
	done  bool // 100% shown
}

func newServeProgress(progress func(string), t hostenv.Throttle) *serveProgress {
	return &serveProgress{progress: progress, throttle: t, seen: map[string]bool{}, bars: map[string]barState{}}
}

// failed shows the lines held back, once: the start failed, so they may
// matter.
func (p *serveProgress) failed() {
	for _, l := range p.held {
		p.progress(l)
	}
	p.held = nil
}

// barLine shows one state of a bar unless the bar already completed.
func (p *serveProgress) barLine(phase, label string, n, total, pct int) {
	st := p.bars[phase]
	if st.done {
		return
	}
	final := n == total
	p.bars[phase] = barState{total: total, done: final}
	if p.throttle.Allow(phase, final) {
		p.progress(fmt.Sprintf("%s %d/%d %s %d%%", label, n, total, bar(pct), pct))
	}
}

// completeBars shows 100% for the bars of phases a milestone ends (another
// rank's line can reach the log before this rank's last bar).
func (p *serveProgress) completeBars(match func(phase string) bool, label func(phase string) string) {
	for _, phase := range slices.Sorted(maps.Keys(p.bars)) {
		st := p.bars[phase]
		if !st.done && match(phase) {
			p.bars[phase] = barState{total: st.total, done: true}
			p.progress(fmt.Sprintf("%s %d/%d %s 100%%", label(phase), st.total, st.total, bar(100)))
		}
	}
}

// feed consumes more log bytes; an incomplete last line waits for the rest.
func (p *serveProgress) feed(b []byte) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexAny(p.buf, "\r\n")
		if i < 0 {
			return
		}
		// The lines shown are the log's: printed without terminal
		// control sequences (termtext).
		line := termtext.Plain(p.buf[:i])
		p.buf = p.buf[i+1:]
		p.line(strings.TrimSpace(string(line)))
	}
}

func (p *serveProgress) line(l string) {
	if l == "" {
		return
	}
	if m := weightsRE.FindStringSubmatch(l); m != nil {
		pct, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		total, _ := strconv.Atoi(m[4])
		p.barLine("weights", "Loading weights: shards", n, total, pct)
		return
	}
	if m := graphsRE.FindStringSubmatch(l); m != nil {
		pct, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		total, _ := strconv.Atoi(m[4])
		p.barLine(m[1], m[1]+":", n, total, pct)
		return
	}
	body := vllmPrefix.ReplaceAllString(l, "")
	for _, f := range serveFatal {
		if strings.Contains(body, f) && p.fatal == "" {
			p.fatal = body
			return
		}
	}
	if strings.Contains(body, "[c10d]") && strings.Contains(body, "failed to connect") {
		if !p.seen["c10d"] {
			p.seen["c10d"] = true
			p.held = append(p.held, "warning: "+body)
		}
		return
	}
	for _, m := range serveMilestones {
		if strings.Contains(body, m) {
			switch m {
			case "Loading weights took", "Model loading took":
				p.completeBars(func(ph string) bool { return ph == "weights" }, func(string) string { return "Loading weights: shards" })
			case "Graph capturing finished":
				p.completeBars(func(ph string) bool { return ph != "weights" }, func(ph string) string { return ph + ":" })
			}
			if !p.seen[m] {
				p.seen[m] = true
				p.progress(body)
			} else if !p.seen[body] {
				// Another rank's copy of a milestone already shown.
				p.seen[body] = true
				p.held = append(p.held, body)
			}
			if m == "Application startup complete." {
				p.up = true
			}
			return
		}
	}
}

// bar renders pct as a 20-cell bar: "[====>               ]".
func bar(pct int) string {
	const width = 20
	pct = min(max(pct, 0), 100)
	full := pct * width / 100
	s := strings.Repeat("=", full)
	if full < width {
		s += ">" + strings.Repeat(" ", width-full-1)
	}
	return "[" + s + "]"
}
