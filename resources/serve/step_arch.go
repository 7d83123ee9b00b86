package serve

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/modelfit"
)

// archStep asks the head container's image what its vLLM and transformers
// know (once per image ID, recorded in the state) and judges the model:
// an error stops the apply before vllm serve starts; a warning is shown.
// A query that cannot run (no python3, no vLLM) says so and stops nothing.
type archStep struct{ r *serveRun }

func newArchStep(r *serveRun) *archStep { return &archStep{r: r} }

// Name names the head.
func (s *archStep) Name() string {
	return fmt.Sprintf("check the model's architecture against the image on %s", s.r.node())
}

// Check always asks: the answer the state holds is read in Run.
func (s *archStep) Check(context.Context) (bool, error) { return false, nil }

// Run judges the model against what the image answered.
func (s *archStep) Run(ctx context.Context, progress func(string)) error {
	ac := s.r.s.Arch
	if ac == nil {
		return nil // the model check after staging found nothing to ask
	}
	im, ok := s.askImage(ctx, progress)
	if !ok {
		return nil
	}
	findings, skipped := modelfit.CheckArchitecture(ac.Config, registry(im), ac.TrustRemoteCode)
	if skipped != "" {
		progress("not checked: " + skipped)
		return nil
	}
	var errs []string
	for _, f := range findings {
		if f.Severity == modelfit.Warning {
			progress(fmt.Sprintf("warning: %s: %s. %s", ac.At, f.Summary, f.Fix))
			continue
		}
		errs = append(errs, fmt.Sprintf("%s: %s\n  %s\n  %s\n  fix: %s", ac.At, f.Summary, f.Detail, ac.Source, f.Fix))
	}
	if len(errs) > 0 {
		return fmt.Errorf("vllm serve %s was not started: the model does not fit the image on %s:\n%s", s.r.spec.Name, s.r.node(), strings.Join(errs, "\n"))
	}
	progress(fmt.Sprintf("the image's vLLM %s and transformers %s know %s (%s)", answerOf(im).VLLM, answerOf(im).Transformers, strings.Join(ac.Config.Architectures, ", "), ac.Config.ModelType))
	return nil
}

// askImage is what the head container's image knows: the state's answer
// for its image ID when current, else the image's own (queryImage); ok is
// false, with a progress line saying why, when there is none.
func (s *archStep) askImage(ctx context.Context, progress func(string)) (state.Image, bool) {
	r := s.r
	res, err := r.e.Read(ctx, r.node(), "docker", "inspect", "--format", "{{.Image}} {{.Config.Image}}", r.spec.Container)
	id, ref, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	if err != nil || !strings.HasPrefix(id, "sha256:") {
		progress(fmt.Sprintf("not checked: the image ID of %s on %s is unknown (%v)", r.spec.Container, r.node(), err))
		return state.Image{}, false
	}
	if r.e.State != nil {
		if im, known := r.e.State.Image(id); known && answerCurrent(im) {
			progress(fmt.Sprintf("the image %s answered on %s (the query took %.1f s)", shortImage("", id), im.CheckedAt.Format(time.DateOnly), im.Seconds))
			return im, true
		}
	}
	return r.queryImage(ctx, id, ref, progress)
}

// Verify has nothing to read back.
func (s *archStep) Verify(context.Context) error { return nil }
