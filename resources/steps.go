package resources

import (
	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/hostenv"
	"github.com/rayform/rayform/resources/kind"
)

// Steps returns the steps that carry out w, its kind's (kind.WithSteps;
// none for a kind without them, such as the model, staged by PrepareSteps):
// for a ray_cluster, remove the
// containers that must go (after re-checking their labels), make the image
// present, check that it has Ray, start the head and see it ALIVE under its
// fabric address in Ray's node table, check that every worker reaches the
// GCS, start the workers and verify the whole table; for a vllm_serve, stop
// the old process, start the new one following its log, and check /health,
// /v1/models and one completion. A failure carries the diagnosis of the
// logs involved.
func Steps(env *hostenv.StepEnv, w *Work) []apply.Step {
	if w == nil || w.Action == plan.NoOp {
		return nil
	}
	k := KindOf(w.Type)
	if k == nil || w.Do == nil {
		return hostenv.Unsupported(w)
	}
	s, ok := k.(kind.WithSteps)
	if !ok {
		return nil
	}
	return s.Steps(env.WithDefaults(), w)
}

// PrepareSteps are the steps of w that prove, before anything is removed
// or stopped, that what w creates can be created, and change nothing that
// runs (kind.WithPrepare): for a ray_cluster that starts containers,
// the image on every node that starts one (pulled where missing, while the
// old containers keep running) and Ray in it. Apply runs them for every
// resource before its walk, whose Steps (with env.Prepared) then leave
// them out.
func PrepareSteps(env *hostenv.StepEnv, w *Work) []apply.Step {
	if w == nil || w.Action == plan.NoOp {
		return nil
	}
	k, ok := KindOf(w.Type).(kind.WithPrepare)
	if !ok || w.Do == nil {
		return nil
	}
	return k.PrepareSteps(env.WithDefaults(), w)
}
