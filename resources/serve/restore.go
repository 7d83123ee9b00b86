package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/termtext"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/servefiles"
	"github.com/rayform/rayform/resources/stepenv"
)

// Atomic replacement (issue 39): a serve whose new start fails to become
// healthy is not left down. Two files beside the serve's record keep what
// that needs, on the head host, so that they survive a lost connection or
// a killed rayform as the serve itself does:
//
//   - serve-NAME.good.json, the recipe of the last start that served (its
//     ServeSpec without secret values, written once /health and
//     /v1/models answered), from which apply puts that serve back;
//   - serve-NAME.failed.json, the spec hash and cause of the last start
//     rayform saw fail, which plan and status read (failedRecord) to say
//     "failed" with the cause instead of "down" or "changed outside of
//     rayform"; a start that serves removes it.
//
// The failed start's log is kept as the previous log when the restore
// starts (rotateLogScript): `logs -previous` and diagnose read it.

// goodPath and failedPath are the two files, inside the head container.
func (s ServeSpec) goodPath() string {
	return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".good.json"
}
func (s ServeSpec) failedPath() string {
	return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".failed.json"
}

// HostGoodPath is goodPath as the head host sees it (plan reads the last
// measured load time from it).
func (s ServeSpec) HostGoodPath(project string) string {
	return servefiles.Host(project, s.Node, s.Container) + "/" + ServeRecordName(s.Name) + ".good.json"
}

// HostFailedPath is failedPath as the head host sees it (plan reads it).
func (s ServeSpec) HostFailedPath(project string) string {
	return servefiles.Host(project, s.Node, s.Container) + "/" + ServeRecordName(s.Name) + ".failed.json"
}

// recipe is what ran when a serve last served: enough to start it again.
type recipe struct {
	// Spec is the serve's spec; the values of its SecretEnv are left out
	// (the start takes them from the configuration, by name).
	Spec           ServeSpec `json:"spec"`
	ClusterSecrets []string  `json:"cluster_secrets,omitempty"`
	// Hash is Spec's hash as it ran (with its secret values).
	Hash string `json:"hash"`
	// LoadSeconds is how long the start took, from the exec of vllm
	// serve to /health answering 200.
	LoadSeconds float64   `json:"load_seconds"`
	At          time.Time `json:"at"`
}

// FailedStart is the record of a start rayform saw fail.
type FailedStart struct {
	SpecHash string    `json:"spec_hash"`
	Cause    string    `json:"cause"`
	At       time.Time `json:"at"`
	// Restored says that apply put the previous serve back.
	Restored bool `json:"restored,omitempty"`
}

// writeFileScript writes content to path atomically, 0600, given to the
// uid owner when not "" (the SSH user, whose probe reads it on the host).
func writeFileScript(path, content, owner string) string {
	tmp := path + ".tmp"
	chown := ""
	if owner != "" {
		chown = fmt.Sprintf(" && { chown %s %s 2>/dev/null || true; }", shell.Quote(owner), shell.Quote(tmp))
	}
	return fmt.Sprintf("umask 077 && printf '%%s\\n' %s > %s%s && mv -f %s %s", shell.Quote(content), shell.Quote(tmp), chown, shell.Quote(tmp), shell.Quote(path))
}

// keepGood records the spec that serves now as the one to put back, and
// forgets an earlier failed start; owner is the uid given the file.
func (r *serveRun) keepGood(ctx context.Context, owner string, loaded time.Duration) error {
	spec := r.spec
	spec.Env = map[string]string{}
	for k, v := range r.spec.Env {
		if !slices.Contains(r.spec.SecretEnv, k) {
			spec.Env[k] = v
		}
	}
	b, err := json.Marshal(recipe{Spec: spec, ClusterSecrets: r.spec.ClusterSecrets, Hash: r.spec.Hash(),
		LoadSeconds: float64(loaded.Milliseconds()) / 1000, At: r.e.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	script := writeFileScript(r.spec.goodPath(), string(b), owner) + "; rm -f " + shell.Quote(r.spec.failedPath())
	if _, err := r.exec(ctx, script, true); err != nil {
		return fmt.Errorf("recording vllm serve %s as the one to put back on %s: %w", r.spec.Name, r.node(), err)
	}
	return nil
}

// readGood reads the recipe of the last start that served; ok false when
// there is none.
func (r *serveRun) readGood(ctx context.Context) (recipe, bool) {
	res, err := r.exec(ctx, "cat "+shell.Quote(r.spec.goodPath())+" 2>/dev/null; true", false)
	var rc recipe
	if err != nil || json.Unmarshal(res.Stdout, &rc) != nil || rc.Hash == "" || len(rc.Spec.Args) == 0 {
		return recipe{}, false
	}
	return rc, true
}

// markFailed records the failed start l (best effort: the failure itself
// is what apply reports).
func (r *serveRun) markFailed(ctx context.Context, l launch, f FailedStart) {
	b, _ := json.Marshal(f)
	_, _ = r.exec(ctx, writeFileScript(r.spec.failedPath(), string(b), l.owner), true)
}

// causeOf is the one-line cause of a failed start: the diagnosis's title,
// else the error's first line.
func causeOf(err error) string {
	var d *stepenv.DiagnosedError
	if errors.As(err, &d) && d.Diagnosis.Title != "" {
		return d.Diagnosis.Title
	}
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// failStart handles a start that did not become healthy: it stops what is
// left of the process (a dead vLLM must not read as "starting"), records
// the failure on the host, and, unless apply runs with -atomic=false,
// puts back the serve that ran before (readGood) and waits for it to
// answer. With -atomic=false a start that only ran out of ready_timeout is
// left loading, as before. The step still fails: the error says what failed, whether the
// previous serve is back, and how long the endpoint was down. l is how the
// failed start went.
func (r *serveRun) failStart(ctx context.Context, err error, l launch, progress func(string)) error {
	if ctx.Err() != nil {
		return err // interrupted: nothing more runs on the hosts
	}
	failed := FailedStart{SpecHash: r.spec.Hash(), Cause: causeOf(err), At: r.e.Now().UTC().Truncate(time.Second)}
	if r.e.NotAtomic && l.readyTimeout > 0 {
		// Slower than its ready_timeout, not failed: -atomic=false keeps
		// it loading (the next apply follows it to ready).
		return err
	}
	if serr := newStopStep(r).Run(ctx, progress); serr != nil {
		return fmt.Errorf("%w\n\nStopping what was left of it failed too: %v", err, serr)
	}
	// Its front too: nothing serves behind it (a serve put back starts
	// its own).
	if serr := (stopFrontStep{r}).Run(ctx, progress); serr != nil {
		return fmt.Errorf("%w\n\nStopping what was left of it failed too: %v", err, serr)
	}
	prev, ok := r.readGood(ctx)
	switch {
	case r.e.NotAtomic:
		r.markFailed(ctx, l, failed)
		return fmt.Errorf("%w\n\nThe previous serve was not put back (apply -atomic=false): %s has no endpoint until a configuration that starts applies.", err, r.w.Address)
	case !ok || prev.Hash == failed.SpecHash:
		r.markFailed(ctx, l, failed)
		return err
	}
	spec, why := r.restoredSpec(prev)
	if why != "" {
		r.markFailed(ctx, l, failed)
		return fmt.Errorf("%w\n\nThe previous serve cannot be put back: %s.", err, why)
	}
	progress(fmt.Sprintf("the new vllm serve %s failed (%s): putting back the one that served before (started by rayform at %s)", r.spec.Name, failed.Cause, prev.At.Format(time.DateTime)))
	rr := &serveRun{e: r.e, w: r.w, s: &ServeWork{Spec: spec, ReadyTimeout: r.s.ReadyTimeout, ClusterNodes: r.s.ClusterNodes}, spec: spec}
	rerr := rr.startServe(ctx, &launch{}, progress)
	if rerr == nil {
		rerr = rr.verifyHTTP(ctx)
	}
	if rerr != nil {
		r.markFailed(ctx, l, failed)
		return fmt.Errorf("%w\n\nPutting back the previous serve failed too: %v", err, rerr)
	}
	failed.Restored = true
	r.markFailed(ctx, l, failed)
	down := "it had stopped before this apply"
	if !r.s.stoppedAt.IsZero() {
		down = fmt.Sprintf("%.1f s, from the stop of the previous serve at %s to its /health answering at %s",
			r.e.Now().Sub(r.s.stoppedAt).Seconds(), r.s.stoppedAt.UTC().Format("15:04:05.0"), r.e.Now().UTC().Format("15:04:05.0"))
	}
	return &RestoredError{Err: err, Summary: fmt.Sprintf("The previous serve of %s is back and answering on port %d (the spec that last served, started by rayform at %s). The endpoint was down for %s. The change is still pending: `rayform logs -previous %s` shows the failed start's log.",
		r.w.Address, spec.Port, prev.At.Format(time.DateTime), down, r.w.Address)}
}

// restoredSpec is the recipe's spec with its secret values from the
// configuration (by name); why says why it cannot be started ("" when it
// can).
func (r *serveRun) restoredSpec(prev recipe) (ServeSpec, string) {
	spec := prev.Spec
	spec.ClusterSecrets = prev.ClusterSecrets
	spec.SecretKey = r.spec.SecretKey
	env := map[string]string{}
	for k, v := range prev.Spec.Env {
		env[k] = v
	}
	for _, k := range prev.Spec.SecretEnv {
		v, ok := r.spec.Env[k]
		if !ok || !slices.Contains(r.spec.SecretEnv, k) {
			return ServeSpec{}, fmt.Sprintf("its secret %s is no longer in the configuration", k)
		}
		env[k] = v
	}
	spec.Env = env
	if spec.Container != r.spec.Container || spec.Node != r.spec.Node {
		return ServeSpec{}, fmt.Sprintf("it ran in %s on %s, not in %s on %s", spec.Container, spec.Node, r.spec.Container, r.spec.Node)
	}
	return spec, ""
}

// RestoredError is a failed start after which apply put the previous serve
// back: the failure (with its diagnosis) and what was done about it.
type RestoredError struct {
	Err     error
	Summary string
}

func (e *RestoredError) Error() string { return e.Err.Error() + "\n\n" + e.Summary }
func (e *RestoredError) Unwrap() error { return e.Err }

// failedReadMax bounds the read of the failed-start record.
const failedReadMax = 4096

// failedStartProbe asks the head for the serve's failed-start record.
func failedStartProbe(project, node, container, name string) observe.ReadProbe {
	spec := ServeSpec{Name: name, Node: node, Container: container}
	return observe.ReadProbe{Path: spec.HostFailedPath(project), Max: failedReadMax}
}

// FailedStartOf is the failed-start record the head's probe read for the
// serve spec names; ok false when there is none (or it does not parse).
func FailedStartOf(hf *observe.HostFacts, spec ServeSpec, project string) (FailedStart, bool) {
	if hf == nil {
		return FailedStart{}, false
	}
	got, ok := hf.Reads[spec.HostFailedPath(project)]
	if !ok || !got.Exists || got.Err != "" || got.Truncated {
		return FailedStart{}, false
	}
	var f FailedStart
	if json.Unmarshal([]byte(got.Content), &f) != nil || f.SpecHash == "" {
		return FailedStart{}, false
	}
	f.Cause = string(termtext.Plain([]byte(f.Cause)))
	return f, true
}

// goodReadMax bounds the read of the recipe: a spec's arguments and
// environment.
const goodReadMax = 64 << 10

// goodProbe asks the head for the serve's recipe (its last load time).
func goodProbe(project, node, container, name string) observe.ReadProbe {
	spec := ServeSpec{Name: name, Node: node, Container: container}
	return observe.ReadProbe{Path: spec.HostGoodPath(project), Max: goodReadMax}
}

// lastLoad is how long the serve's last start that served took on its
// head (exec to /health 200) and when it ran, as the head's probe read
// its recipe; ok false when none was measured.
func lastLoad(hf *observe.HostFacts, spec ServeSpec, project string) (secs float64, at time.Time, ok bool) {
	if hf == nil {
		return 0, time.Time{}, false
	}
	got, found := hf.Reads[spec.HostGoodPath(project)]
	if !found || !got.Exists || got.Err != "" || got.Truncated {
		return 0, time.Time{}, false
	}
	var rc recipe
	if json.Unmarshal([]byte(got.Content), &rc) != nil || rc.LoadSeconds <= 0 {
		return 0, time.Time{}, false
	}
	return rc.LoadSeconds, rc.At, true
}
