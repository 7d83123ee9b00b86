package kindstest

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/serve"
)

// TestBlueGreenPlan (issue 39 item 2): a running serve's max_model_len
// change is blue/green when Ray's free GPUs hold the new serve beside it
// (the classic executor: one free on the head, eight in all), and
// stop-then-start when they do not (the head full); plan says which, and
// the work says how apply replaces it.
func TestBlueGreenPlan(t *testing.T) {
	src := strings.Replace(string(benchConfig(2)), "pipeline_parallel_size = length(var.hosts)", "pipeline_parallel_size = 1", 1)
	cc := convergedFrom(t, []byte(src), nil)
	changed := strings.Replace(src, "max_model_len          = 32768", "max_model_len          = 16384", 1)
	if changed == src {
		t.Fatal("the bench config has no max_model_len to change")
	}
	head := cc.facts.Hosts[`gpu["h1"]`]
	for _, c := range []struct {
		name      string
		used      map[string][2]float64 // GPUs used and total per node IP, as Ray reports them
		blueGreen bool
		reason    string
	}{
		{"room beside it", map[string][2]float64{"192.168.0.10": {4, 8}, "192.168.0.11": {4, 8}}, true,
			`blue/green: no downtime: Ray's free GPUs (gpu["h1"] 4 of 8, gpu["h2"] 4 of 8) hold the new serve beside the running one`},
		{"the head full", map[string][2]float64{"192.168.0.10": {8, 8}, "192.168.0.11": {0, 8}}, false,
			"stop-then-start: its endpoint is down while the new serve loads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			delete(head.HTTP, cluster.RayUsageURL(benchDashPort))
			setRayUsage(head, benchDashPort, c.used)
			res := Plan(PlanInput{Config: planConfig(t, changed, cc.facts), Facts: cc.facts, Project: benchProject})
			if errs := res.Plan.Errors(); len(errs) > 0 {
				t.Fatalf("plan errors: %+v", errs)
			}
			var rc *plan.ResourceChange
			for i := range res.Plan.Changes {
				if res.Plan.Changes[i].Address == "vllm_serve.llama" {
					rc = &res.Plan.Changes[i]
				}
			}
			if rc == nil || rc.Action != plan.Replace {
				t.Fatalf("vllm_serve.llama is not replaced: %+v", res.Plan.Changes)
			}
			if !strings.Contains(strings.Join(rc.Reasons, "\n"), c.reason) {
				t.Errorf("reasons %q lack %q", rc.Reasons, c.reason)
			}
			sw := serve.WorkOf(res.Work["vllm_serve.llama"])
			if sw == nil || sw.BlueGreen != c.blueGreen || sw.Stop == c.blueGreen {
				t.Errorf("work %+v: want BlueGreen %v, Stop %v", sw, c.blueGreen, !c.blueGreen)
			}
		})
	}
}

// TestUnifiedMemoryShared (issue 39 item 7): two serves of one GPU on a
// cluster of two nodes, both placed on the head by vLLM's classic Ray
// executor, on GPUs of their own. On unified memory (GB10) they take
// their gpu_memory_utilization of the same memory: together above 1 plan
// refuses them naming the head; at most 1 together, or on discrete GPUs,
// they fit.
func TestUnifiedMemoryShared(t *testing.T) {
	src := strings.Replace(string(benchConfig(2)), "pipeline_parallel_size = length(var.hosts)", "pipeline_parallel_size = 1", 1)
	src = strings.Replace(src, "tensor_parallel_size   = 8", "tensor_parallel_size   = 1\n  gpu_memory_utilization = 0.85", 1)
	cc := convergedFrom(t, []byte(src), nil)
	half := func(util string) string {
		return src + "\nvllm_serve \"half\" {\n  cluster = ray_cluster.main\n  model   = \"Qwen/Qwen3-0.6B\"\n  port    = 8001\n  gpu_memory_utilization = " + util + "\n}\n"
	}
	const want = `vllm_serve.half and vllm_serve.llama run on GPUs of gpu["h1"], whose memory is unified, and ask 1.35 of it together`
	for _, c := range []struct {
		name    string
		util    string
		unified bool
		refused bool
	}{
		{"unified, 0.85 + 0.5", "0.5", true, true},
		{"unified, 0.85 + 0.05", "0.05", true, false},
		{"discrete GPUs, 0.85 + 0.5", "0.5", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, hf := range cc.facts.Hosts {
				hf.UnifiedMemory = c.unified
			}
			res := Plan(PlanInput{Config: planConfig(t, half(c.util), cc.facts), Facts: cc.facts, Project: benchProject})
			found := false
			for _, f := range res.Plan.Errors() {
				if f.Summary == want {
					found = true
					if !strings.Contains(f.Detail, "Free memory on device cuda:0") || f.Host != `gpu["h1"]` {
						t.Errorf("finding %+v", f)
					}
				}
			}
			if found != c.refused {
				t.Errorf("refused %v, want %v: %+v", found, c.refused, res.Plan.Errors())
			}
		})
	}
}
