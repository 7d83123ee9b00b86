package views

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/plan"
)

// One Ctrl-C while a serve starts: the start finishes (healthy), the next
// step does not begin, and apply's lines say so, not "Replacement failed"
// (issue 39 item 5).
func TestInterruptAfterAHealthyStep(t *testing.T) {
	stop := make(chan struct{})
	var out bytes.Buffer
	hooks := newTextHooks(&out, false)
	r := &apply.Resource{Address: "vllm_serve.qwen", Action: plan.Replace, Steps: []apply.Step{
		apply.Func{Label: "start vllm serve qwen on spark1", RunFunc: func(ctx context.Context, progress func(string)) error {
			close(stop) // the interrupt arrives while the serve starts
			progress("Application startup complete.")
			return nil
		}},
		apply.Func{Label: "test a completion of qwen on spark1", RunFunc: func(context.Context, func(string)) error {
			t.Error("a step started after the interrupt")
			return nil
		}},
	}}
	g := dag.New()
	g.Add(r.Address)
	err := apply.Walk(context.Background(), g, map[string]*apply.Resource{r.Address: r}, hooks, apply.Options{Parallelism: 1, Stop: stop})
	if err == nil {
		t.Fatal("the walk did not report the step the interrupt kept from starting")
	}
	got := out.String()
	for _, want := range []string{"Application startup complete.", `vllm_serve.qwen: stopped by the interrupt after 0s, before "test a completion of qwen on spark1"; the steps before it finished`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "failed") {
		t.Errorf("a healthy step cut short by the interrupt reads as a failure:\n%s", got)
	}
}
