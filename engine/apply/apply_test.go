package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/plan"
)

// recorder is a Hooks that records events in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}
func (r *recorder) ResourceStart(a string, act plan.Action) { r.add("start " + a) }
func (r *recorder) StepStart(a, s string)                   { r.add("step " + a + " " + s) }
func (r *recorder) StepSkipped(a, s string)                 { r.add("skip " + a + " " + s) }
func (r *recorder) Progress(a, m string)                    { r.add("progress " + a + " " + m) }
func (r *recorder) ResourceComplete(a string, act plan.Action, _ time.Duration) {
	r.add("complete " + a)
}
func (r *recorder) ResourceErrored(a string, act plan.Action, _ time.Duration, err error) {
	r.add("error " + a)
}

func (r *recorder) index(ev string) int { return slices.Index(r.events, ev) }

func graph() *dag.Graph {
	g := dag.New()
	g.Connect("ray_cluster.main", "network.fabric")
	g.Connect("vllm_serve.qwen", "ray_cluster.main")
	g.Add("ray_cluster.other")
	return g
}

func TestWalkOrderAndSkip(t *testing.T) {
	var ran []string
	var mu sync.Mutex
	mark := func(name string) func(context.Context, func(string)) error {
		return func(context.Context, func(string)) error {
			mu.Lock()
			ran = append(ran, name)
			mu.Unlock()
			return nil
		}
	}
	resources := map[string]*Resource{
		"ray_cluster.main": {Address: "ray_cluster.main", Action: plan.Create, Steps: []Step{
			Func{Label: "pull", CheckFunc: func(context.Context) (bool, error) { return true, nil }, RunFunc: mark("pull")},
			Func{Label: "head", RunFunc: func(ctx context.Context, p func(string)) error { p("started"); return mark("head")(ctx, p) }},
			Func{Label: "workers", RunFunc: mark("workers"), VerifyFunc: func(context.Context) error { return nil }},
		}},
		"vllm_serve.qwen": {Address: "vllm_serve.qwen", Action: plan.Create, Steps: []Step{Func{Label: "serve", RunFunc: mark("serve")}}},
	}
	rec := &recorder{}
	if err := Walk(context.Background(), graph(), resources, rec, Options{Parallelism: 2}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"head", "workers", "serve"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	if rec.index("skip ray_cluster.main pull") < 0 {
		t.Errorf("satisfied check did not skip: %v", rec.events)
	}
	if rec.index("progress ray_cluster.main started") < 0 {
		t.Errorf("progress not reported: %v", rec.events)
	}
	if !(rec.index("complete ray_cluster.main") < rec.index("start vllm_serve.qwen")) {
		t.Errorf("serve started before the cluster completed: %v", rec.events)
	}
}

func TestWalkFailureStopsDependentsOnly(t *testing.T) {
	boom := errors.New("c10d master unreachable")
	otherRan := false
	resources := map[string]*Resource{
		"ray_cluster.main":  {Address: "ray_cluster.main", Action: plan.Create, Steps: []Step{Func{Label: "head", RunFunc: func(context.Context, func(string)) error { return boom }}}},
		"vllm_serve.qwen":   {Address: "vllm_serve.qwen", Action: plan.Create, Steps: []Step{Func{Label: "serve", RunFunc: func(context.Context, func(string)) error { t.Error("dependent ran"); return nil }}}},
		"ray_cluster.other": {Address: "ray_cluster.other", Action: plan.Create, Steps: []Step{Func{Label: "head", RunFunc: func(context.Context, func(string)) error { otherRan = true; return nil }}}},
	}
	rec := &recorder{}
	err := Walk(context.Background(), graph(), resources, rec, Options{})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want it to wrap %v", err, boom)
	}
	if !errors.Is(err, dag.ErrSkipped) {
		t.Errorf("dependent not reported as skipped: %v", err)
	}
	var se *StepError
	if !errors.As(err, &se) || se.Address != "ray_cluster.main" || se.Step != "head" {
		t.Errorf("StepError = %+v, want ray_cluster.main/head", se)
	}
	if !otherRan {
		t.Error("unrelated resource did not run")
	}
	if rec.index("error ray_cluster.main") < 0 {
		t.Errorf("no error hook: %v", rec.events)
	}
}

func TestWalkVerifyFailure(t *testing.T) {
	resources := map[string]*Resource{
		"ray_cluster.main": {Address: "ray_cluster.main", Action: plan.Create, Steps: []Step{Func{
			Label: "head", RunFunc: func(context.Context, func(string)) error { return nil },
			VerifyFunc: func(context.Context) error { return fmt.Errorf("head registered as 10.1.230.180") },
		}}},
	}
	err := Walk(context.Background(), graph(), resources, &recorder{}, Options{})
	if err == nil || !strings.Contains(err.Error(), "verifying: head registered as 10.1.230.180") {
		t.Fatalf("err = %v", err)
	}
}

func TestWalkGracefulStop(t *testing.T) {
	stop := make(chan struct{})
	second := false
	resources := map[string]*Resource{
		"ray_cluster.main": {Address: "ray_cluster.main", Action: plan.Create, Steps: []Step{
			Func{Label: "head", RunFunc: func(context.Context, func(string)) error { close(stop); return nil }},
			Func{Label: "workers", RunFunc: func(context.Context, func(string)) error { second = true; return nil }},
		}},
	}
	err := Walk(context.Background(), graph(), resources, &recorder{}, Options{Stop: stop})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if second {
		t.Fatal("a step started after the stop request")
	}
}

// TestAheadPartReportsNoCompletion: a part of a resource run ahead (a
// serve stopped before its cluster changes) reports its steps, not the
// resource's completion (issue 22, item 1: "Replacement complete after 0s"
// was printed for a serve that was only stopped).
func TestAheadPartReportsNoCompletion(t *testing.T) {
	g := dag.New()
	g.Add("vllm_serve.qwen#stop")
	rs := map[string]*Resource{"vllm_serve.qwen#stop": {Address: "vllm_serve.qwen", Action: plan.Replace, Ahead: true,
		Steps: []Step{Func{Label: "stop", RunFunc: func(context.Context, func(string)) error { return nil }}}}}
	rec := &recorder{}
	if err := Walk(context.Background(), g, rs, rec, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"step vllm_serve.qwen stop"}; !slices.Equal(rec.events, want) {
		t.Errorf("events %q, want %q", rec.events, want)
	}
}

// TestPrepare runs every resource's steps, reports steps only, and joins
// the failures; a stop starts no further step.
func TestPrepare(t *testing.T) {
	ok := func(context.Context, func(string)) error { return nil }
	fail := func(context.Context, func(string)) error { return errors.New("no such image") }
	rec := &recorder{}
	err := Prepare(context.Background(), []*Resource{
		{Address: "ray_cluster.a", Action: plan.Replace, Steps: []Step{Func{Label: "image", RunFunc: fail}, Func{Label: "ray", RunFunc: ok}}},
		{Address: "ray_cluster.b", Action: plan.Create, Steps: []Step{Func{Label: "image", RunFunc: ok}, Func{Label: "ray", RunFunc: ok}}},
	}, rec, Options{})
	var se *StepError
	if !errors.As(err, &se) || se.Address != "ray_cluster.a" || se.Step != "image" {
		t.Fatalf("Prepare: %v, want ray_cluster.a's image step failing", err)
	}
	slices.Sort(rec.events)
	want := []string{"error ray_cluster.a", "step ray_cluster.a image", "step ray_cluster.b image", "step ray_cluster.b ray"}
	if !slices.Equal(rec.events, want) {
		t.Errorf("events %q, want %q", rec.events, want)
	}
	stop := make(chan struct{})
	close(stop)
	err = Prepare(context.Background(), []*Resource{{Address: "ray_cluster.a", Steps: []Step{Func{Label: "image", RunFunc: ok}}}}, &recorder{}, Options{Stop: stop})
	if !errors.Is(err, ErrInterrupted) {
		t.Errorf("Prepare after a stop: %v, want ErrInterrupted", err)
	}
}
