package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/stepenv"
)

// startStep starts vllm serve, follows its log into progress lines until
// "Application startup complete." and verifies /health and /v1/models; a
// start that does not get there is stopped and, unless apply runs with
// -atomic=false, the serve that ran before is put back (failStart).
type startStep struct {
	r *serveRun
	// l is how the start went, for its records and its diagnosis.
	l launch
}

func newStartStep(r *serveRun) *startStep { return &startStep{r: r} }

// launch is what one start of the serve process learns on the way.
type launch struct {
	// owner is the SSH user's uid, given the serve's files ("" unknown).
	owner string
	// readyTimeout and exited say how the start ended, for the diagnosis:
	// rayform stopped waiting after readyTimeout, or found the process gone.
	readyTimeout time.Duration
	exited       bool
}

// Name names the serve and its head.
func (s *startStep) Name() string {
	return fmt.Sprintf("start vllm serve %s on %s", s.r.spec.Name, s.r.node())
}

// Check always starts: the plan decided that the serve must (re)start.
func (s *startStep) Check(context.Context) (bool, error) { return false, nil }

// Run starts the serve and waits for its answer; a start that answers is
// recorded as the serve to put back, one that does not is handled by
// failStart.
func (s *startStep) Run(ctx context.Context, progress func(string)) error {
	r := s.r
	began := r.e.Now()
	err := r.startServe(ctx, &s.l, progress)
	if err == nil {
		err = r.verifyHTTP(ctx)
	}
	if err != nil {
		return r.failStart(ctx, err, s.l, progress)
	}
	// It answers: the serve to put back if a later change fails
	// (recorded here, not after the test completion, so that an
	// interrupt before that step still records it).
	return r.keepGood(ctx, s.l.owner, r.e.Now().Sub(began))
}

// Verify reads the answer back once more, as every step's postcondition:
// Run waited for it (a start that does not answer is a failed start,
// which Run handles: failStart).
func (s *startStep) Verify(ctx context.Context) error { return s.r.verifyHTTP(ctx) }

// startServe starts the serve: behind its front (front.go) where the head
// container has python3, the front first on the serve's address and port
// (a port that is not free fails at once, not after the load), then vLLM
// on a free loopback port, its pid, log and record the serve's; without
// python3, vLLM on the serve's address and port itself. l records the
// start.
func (r *serveRun) startServe(ctx context.Context, l *launch, progress func(string)) error {
	if r.spec.ListenHost() == "" {
		return r.start(ctx, l, progress) // which says why it cannot start
	}
	port, python, err := r.loopbackPort(ctx)
	if err != nil {
		return err
	}
	if !python {
		return r.start(ctx, l, progress)
	}
	if err := r.startFront(ctx, port, false, progress); err != nil {
		return err
	}
	progress(fmt.Sprintf("vLLM listens on 127.0.0.1:%d behind the front", port))
	gen := &serveRun{e: r.e, w: r.w, s: r.s, spec: r.spec.generationSpec(port)}
	return gen.start(ctx, l, progress)
}

// start launches vllm serve in the head container, keeping the previous
// log, and follows it to ready (follow); l records the start.
func (r *serveRun) start(ctx context.Context, l *launch, progress func(string)) error {
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
	l.owner = owner
	if _, err := r.e.Run(ctx, node, transport.Cmd{Argv: r.spec.ExecArgs(owner), Env: r.spec.SecretEnvValues(), Mutating: true}); err != nil {
		return fmt.Errorf("starting vllm serve %s on %s: %w", r.spec.Name, node, err)
	}
	return r.follow(ctx, l, progress)
}

// follow reads the serve's log into progress lines until vLLM prints
// "Application startup complete.", fails, exits, or ready_timeout runs
// out; a failure carries its diagnosis, and l says how it ended.
func (r *serveRun) follow(ctx context.Context, l *launch, progress func(string)) error {
	node, c := r.node(), r.spec.Container
	timeout := r.s.ReadyTimeout
	if timeout <= 0 {
		timeout = stepenv.DefaultServeTimeout
	}
	p := newServeProgress(progress, stepenv.NewThrottle(r.e.Now, r.e.ProgressInterval))
	offset := 0
	err := r.e.PollUntil(ctx, timeout, func(ctx context.Context) (bool, error) {
		script := r.pidStateScript("starting") + fmt.Sprintf("; tail -c +%d %s 2>/dev/null; true", offset+1, shell.Quote(r.spec.LogPath()))
		res, err := r.exec(ctx, script, false)
		if err != nil {
			if stepenv.IsNoSuch(err) {
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
			l.exited = true
			return false, fmt.Errorf("vllm serve %s (pid %s) exited on %s before it was ready", r.spec.Name, pid, node)
		}
		return false, nil
	})
	if errors.Is(err, stepenv.ErrTimedOut) {
		p.failed()
		err = fmt.Errorf("vllm serve %s on %s is not ready after %s (ready_timeout)", r.spec.Name, node, timeout)
		l.readyTimeout = timeout
	}
	if err != nil {
		return r.diagnoseStart(ctx, err, *l)
	}
	return nil
}
