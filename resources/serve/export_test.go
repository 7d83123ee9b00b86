package serve

import (
	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/resources/stepenv"
)

// The hooks of the package's external tests (package serve_test, which
// share the steps' fake lab, resources/internal/steplab).

// ServeProgress follows a serve's log as the start step does.
type ServeProgress struct{ p *serveProgress }

// NewServeProgress hands the progress lines of the log it is fed to
// progress, throttled by t.
func NewServeProgress(progress func(string), t stepenv.Throttle) ServeProgress {
	return ServeProgress{newServeProgress(progress, t)}
}

// Feed reads the next chunk of the log.
func (s ServeProgress) Feed(b []byte) { s.p.feed(b) }

// Failed shows the lines held back, as when the start fails.
func (s ServeProgress) Failed() { s.p.failed() }

// Up reports whether vLLM said it is up; Fatal is its fatal line, if any.
func (s ServeProgress) Up() bool { return s.p.up }

// Fatal is the fatal line the log showed, "" for none.
func (s ServeProgress) Fatal() string { return s.p.fatal }

// Bar is a progress bar at pct percent.
var Bar = bar

// StepsWith are the steps of a serve's work w in env, as Kind.Steps
// gives them with the StepEnv it builds from the run's kind.Env.
func StepsWith(env *stepenv.StepEnv, w *kind.Work) []apply.Step {
	if WorkOf(w) == nil {
		return kind.Unsupported(w)
	}
	return serveSteps(env, w)
}
