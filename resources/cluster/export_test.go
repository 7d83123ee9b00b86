package cluster

import (
	"io"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/resources/stepenv"
)

// The hooks of the package's external tests (package cluster_test, which
// share the steps' fake lab, resources/internal/steplab).

// RayTableReasons is the judgment of Ray's node table against specs that
// plan and apply's verification share, as reasons.
func RayTableReasons(specs []ContainerSpec, rows []RayNode) []string {
	return reasons(judgeRayTable(specs, rows))
}

// PullProgress turns what is written to it, docker pull's output for
// image, into the pull's progress lines.
func PullProgress(image string, progress func(string), t stepenv.Throttle) io.Writer {
	p := &pullProgress{image: image, layers: map[string]bool{}, progress: progress, throttle: t}
	return stepenv.NewLineWriter(p.line)
}

// StepsWith are the steps of a cluster's work w in env, as Kind.Steps
// gives them with the StepEnv it builds from the run's kind.Env.
func StepsWith(env *stepenv.StepEnv, w *kind.Work) []apply.Step {
	if WorkOf(w) == nil {
		return kind.Unsupported(w)
	}
	return clusterSteps(env, w)
}
