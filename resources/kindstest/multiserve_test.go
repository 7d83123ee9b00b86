package kindstest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/serve"
)

// twoServesConfig is benchConfig(1) (one node of 8 GPUs) with its serve at
// tensor_parallel_size 4 and a second serve of 4 other GPUs on port 8001:
// two serves on one cluster, as testdata/config/valid/two-clusters
// declares.
func twoServesConfig() string {
	src := strings.Replace(string(benchConfig(1)), "tensor_parallel_size   = 8", "tensor_parallel_size   = 4", 1)
	return src + `
vllm_serve "small" {
  cluster              = ray_cluster.main
  model                = "Qwen/Qwen3-0.6B"
  tensor_parallel_size = 4
  port                 = 8001
  env                  = { CUDA_VISIBLE_DEVICES = "4,5,6,7" }
}
`
}

// TestTwoServesOnOneClusterConverge is issue 20's bug: observe had one
// serve port per host, so only the last serve's port was probed and every
// serve was judged against that one model list; a converged two-serve
// cluster planned a replacement on every run. Each serve now asks for its
// own port's answers and its own record.
func TestTwoServesOnOneClusterConverge(t *testing.T) {
	cc := convergedCluster(t, 1)
	cfg := planConfig(t, twoServesConfig(), cc.facts)
	rc := cfg.RayClusters["main"]

	// Each serve asks for its own port and record.
	hs := ObserveSpec(cfg, nil, benchProject).Hosts[rc.Head]
	var urls, records []string
	for _, p := range hs.HTTP {
		urls = append(urls, p.URL)
		if p.Owner != cluster.ContainerName(rc) {
			t.Errorf("%s: owner %q, want the head container %q", p.URL, p.Owner, cluster.ContainerName(rc))
		}
	}
	for _, r := range hs.Records {
		records = append(records, r.Name)
	}
	for _, want := range []string{"http://127.0.0.1:8000/health", "http://127.0.0.1:8000/v1/models", "http://127.0.0.1:8001/health", "http://127.0.0.1:8001/v1/models"} {
		if !slices.Contains(urls, want) {
			t.Errorf("the head's probe does not ask %s; it asks %v", want, urls)
		}
	}
	if !slices.Contains(records, "serve-llama") || !slices.Contains(records, "serve-small") {
		t.Errorf("the head's probe reads records %v, want both serves'", records)
	}
	if err := hs.Validate(); err != nil {
		t.Fatal(err)
	}

	// Both serves run and each port answers its own model: no change.
	head := cc.facts.Hosts[rc.Head]
	head.Records = map[string]observe.ProcessRecord{}
	answers := map[string]serve.VLLM{}
	for _, name := range []string{"llama", "small"} {
		sv := cfg.Serves[name]
		spec, err := serve.ServeSpecFor(serve.View(cfg.Config), sv)
		if err != nil {
			t.Fatal(err)
		}
		attrs := map[string]string{}
		for k, v := range spec.Attrs {
			attrs[k] = string(v)
		}
		head.Records["serve-"+name] = observe.ProcessRecord{Found: true, Resource: sv.Addr, SpecHash: spec.Hash(), Attrs: attrs, Sensitive: spec.Sensitive, Alive: true}
		answers[name] = serve.VLLM{Observed: true, Health: observe.HTTPCheck{Status: 200}, ModelsCheck: observe.HTTPCheck{Status: 200},
			Models: []serve.Model{{ID: spec.ServedName, MaxModelLen: spec.MaxModelLen}}}
		setServeAnswer(head, sv.Port, answers[name])
	}
	in := PlanInput{Config: cfg, Facts: cc.facts, Project: benchProject}
	checkNoChanges(t, Plan(in).Plan)

	// One port answering the other's model replaces that serve only.
	setServeAnswer(head, 8001, answers["llama"])
	p := Plan(in).Plan
	for _, ch := range p.Changes {
		want := plan.NoOp
		if ch.Address == "vllm_serve.small" {
			want = plan.Replace
			if !strings.Contains(strings.Join(ch.Reasons, "; "), "vLLM serves llama-405b; want Qwen/Qwen3-0.6B") {
				t.Errorf("%s: reasons %v", ch.Address, ch.Reasons)
			}
		}
		if ch.Action != want {
			t.Errorf("%s: %s, want %s (%v)", ch.Address, ch.Action, want, ch.Reasons)
		}
	}
}

// TestServesGPUBudget is issue 22 item 3: serves that each fit the
// cluster but together need more GPUs than it has were not refused at
// plan; apply started them and one failed with no cause named (real Ray
// leaves its placement group pending until vLLM's timeout). plan now
// refuses them, naming each serve, the GPUs it needs and what the cluster
// has, before any change.
func TestServesGPUBudget(t *testing.T) {
	cc := convergedCluster(t, 2)
	// Two nodes of 8 GPUs: serves of 8, 8 and 4 GPUs need 20.
	src := strings.Replace(string(benchConfig(2)), "pipeline_parallel_size = length(var.hosts)", "pipeline_parallel_size = 1", 1) + `
vllm_serve "small" {
  cluster              = ray_cluster.main
  model                = "Qwen/Qwen3-0.6B"
  tensor_parallel_size = 8
  port                 = 8001
}

vllm_serve "third" {
  cluster                = ray_cluster.main
  model                  = "Qwen/Qwen3-0.6B"
  served_model_name      = "third"
  tensor_parallel_size   = 2
  pipeline_parallel_size = 2
  port                   = 8002
}
`
	budget := func(src string) []plan.Finding {
		cfg := planConfig(t, src, cc.facts)
		var out []plan.Finding
		for _, f := range Plan(PlanInput{Config: cfg, Facts: cc.facts, Project: benchProject}).Plan.Errors() {
			if strings.Contains(f.Summary, "GPUs") {
				out = append(out, f)
			}
		}
		return out
	}
	found := budget(src)
	if len(found) != 1 {
		t.Fatalf("want one GPU budget error, got %+v", found)
	}
	text := found[0].Summary + " " + found[0].Detail
	for _, want := range []string{"ray_cluster.main", "need 20 GPUs together, but Ray will see 16", "vllm_serve.llama needs 8 (8 × 1)", "vllm_serve.small needs 8 (8 × 1)", "vllm_serve.third needs 4 (2 × 2)", `gpu["h1"]: 8, gpu["h2"]: 8`} {
		if !strings.Contains(text, want) {
			t.Errorf("finding lacks %q: %s", want, text)
		}
	}
	// Without the third, 16 of 16: enough GPUs together, but vLLM's
	// classic Ray executor needs a GPU on the head for each serve, and the
	// first serve of 8 packs all 8 of the head's (issue 33 item 1).
	two := src[:strings.Index(src, "vllm_serve \"third\"")]
	if f := budget(two); len(f) != 1 || !strings.Contains(f[0].Summary, `vllm_serve.small cannot start: its engine needs a free GPU on the head gpu["h1"], and the serves started before it leave 0 of its 8 GPUs free`) ||
		!strings.Contains(f[0].Detail, `GPUs free, the serves started smallest first on the idle cluster, once vllm_serve.llama (8) started: gpu["h1"] 0 of 8, gpu["h2"] 8 of 8.`) {
		t.Errorf("two serves of 8 GPUs on 16: %+v", f)
	}
	// 7 and 8: the serve of 7 starts first and leaves the head a GPU.
	if f := budget(strings.Replace(two, "tensor_parallel_size = 8\n  port                 = 8001", "tensor_parallel_size = 7\n  port                 = 8001", 1)); len(f) != 0 {
		t.Errorf("serves of 7 and 8 GPUs on 16: %+v", f)
	}
}

// TestServesShareADevice: on a single node vLLM runs without Ray on the
// node's first GPUs, so two serves share them unless CUDA_VISIBLE_DEVICES
// says otherwise, and each asks gpu_memory_utilization of each device.
func TestServesShareADevice(t *testing.T) {
	cc := convergedCluster(t, 1)
	errs := func(src string) []plan.Finding {
		cfg := planConfig(t, src, cc.facts)
		var out []plan.Finding
		for _, f := range Plan(PlanInput{Config: cfg, Facts: cc.facts, Project: benchProject}).Plan.Errors() {
			if strings.Contains(f.Summary, " share GPU") {
				out = append(out, f)
			}
		}
		return out
	}
	own := twoServesConfig()
	if f := errs(own); len(f) != 0 {
		t.Errorf("serves on GPUs 0-3 and 4-7: %+v", f)
	}
	shared := strings.Replace(own, `  env                  = { CUDA_VISIBLE_DEVICES = "4,5,6,7" }`+"\n", "", 1)
	f := errs(shared)
	if len(f) != 1 || f[0].Summary != `vllm_serve.llama and vllm_serve.small share GPUs 0, 1, 2, 3 of gpu["h1"] and ask 1.80 of each one's memory together` ||
		!strings.Contains(f[0].Detail, "Free memory on device cuda:0") {
		t.Fatalf("two serves of 0.9 on GPUs 0-3: %+v", f)
	}
	small := strings.Replace(shared, `  port                 = 8001`, "  port                 = 8001\n  gpu_memory_utilization = 0.1", 1)
	if f := errs(small); len(f) != 0 {
		t.Errorf("0.9 and 0.1 on the same GPUs: %+v", f)
	}
}

// TestServesHeadGPUBudget: on a multi-node cluster each serve's engine
// takes one GPU of the head, so 9 serves of one GPU do not fit a head of
// 8 GPUs even though the cluster has 16; 8 do.
func TestServesHeadGPUBudget(t *testing.T) {
	cc := convergedCluster(t, 2)
	base := strings.Replace(strings.Replace(string(benchConfig(2)), "tensor_parallel_size   = 8", "tensor_parallel_size   = 1", 1),
		"pipeline_parallel_size = length(var.hosts)", "pipeline_parallel_size = 1", 1)
	withServes := func(n int) string {
		src := base
		for i := range n {
			src += fmt.Sprintf("\nvllm_serve \"s%d\" {\n  cluster = ray_cluster.main\n  model   = \"m%d\"\n  port    = %d\n}\n", i, i, 8001+i)
		}
		return src
	}
	budget := func(src string) []plan.Finding {
		cfg := planConfig(t, src, cc.facts)
		var out []plan.Finding
		for _, f := range Plan(PlanInput{Config: cfg, Facts: cc.facts, Project: benchProject}).Plan.Errors() {
			if strings.Contains(f.Summary, "serves") {
				out = append(out, f)
			}
		}
		return out
	}
	if f := budget(withServes(7)); len(f) != 0 {
		t.Errorf("8 serves on a head of 8 GPUs: %+v", f)
	}
	f := budget(withServes(8))
	if len(f) != 1 || !strings.Contains(f[0].Summary, `9 serves on ray_cluster.main, but its head gpu["h1"] has 8 GPUs`) ||
		!strings.Contains(f[0].Detail, "Current node has no GPU available") {
		t.Fatalf("9 serves on a head of 8 GPUs: %+v", f)
	}
}

// TestTwoClustersExampleFitsItsGPUs plans testdata's two-clusters example
// (two serves of 2 GPUs on a single 4-GPU node, one of them given GPUs 2
// and 3): no GPU budget error; without its CUDA_VISIBLE_DEVICES both
// would run on GPUs 0 and 1.
func TestTwoClustersExampleFitsItsGPUs(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "config", "valid", "two-clusters", "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{}, Errors: map[string]error{}}
	budgetErrors := func(src string) []string {
		cfg := planConfig(t, src, facts)
		var out []string
		for _, f := range Plan(PlanInput{Config: cfg, Facts: facts, Project: "p"}).Plan.Errors() {
			if strings.Contains(f.Summary, "share GPU") || strings.Contains(f.Summary, "GPUs together") || strings.Contains(f.Summary, "serves on") {
				out = append(out, f.Summary)
			}
		}
		return out
	}
	if got := budgetErrors(string(src)); len(got) != 0 {
		t.Errorf("the example: %v", got)
	}
	without := strings.Replace(string(src), `, CUDA_VISIBLE_DEVICES = "2,3"`, "", 1)
	if got := budgetErrors(without); len(got) != 1 || !strings.Contains(got[0], "vllm_serve.small and vllm_serve.tiny share GPUs 0, 1 of c") {
		t.Errorf("without CUDA_VISIBLE_DEVICES: %v", got)
	}
}

// setRayUsage makes hf's dashboard answer /api/cluster_status with each
// node's GPUs used of total (by fabric IP), in the shape Ray 2.53's
// dashboard returns the monitor's report (by node ID, keys in camel case:
// testdata/observe/ray-2.53-cluster-status-tp2.json).
func setRayUsage(hf *observe.HostFacts, port int, gpus map[string][2]float64) {
	byNode := map[string]any{}
	for ip, g := range gpus {
		// Keyed by node ID, the node's IP in its node:IP resource.
		byNode[fmt.Sprintf("%056x", len(byNode)+1)] = map[string]any{"CPU": []float64{0, 224}, "GPU": []float64{g[0], g[1]}, "objectStoreMemory": []float64{0, 2e11}, "node:" + ip: []float64{0, 1}}
	}
	body, _ := json.Marshal(map[string]any{"result": true, "msg": "Got cluster status.", "data": map[string]any{
		"autoscalingStatus": nil, "autoscalingError": nil,
		"clusterStatus": map[string]any{"loadMetricsReport": map[string]any{"usageByNode": byNode}, "time": 1.7e9, "monitorPid": 42}}})
	if hf.HTTP == nil {
		hf.HTTP = map[string]observe.HTTPResult{}
	}
	hf.HTTP[cluster.RayUsageURL(port)] = observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Via: "curl", Body: string(body)}
}

// TestServeAddedToFullHead is issue 33 item 1: a serve of 8 GPUs runs on
// a cluster of two 8-GPU nodes; Ray packed its placement group onto the
// head (PACK, the first bundle pinned there), so Ray reports the head's 8
// GPUs used. Adding a serve of 1 GPU planned "1 to add" (the budget
// counted one head GPU per serve) and apply failed with vLLM's "Current
// node has no GPU available". Plan now refuses it, naming the head and
// its free GPUs, and says what fits: restarting the running serve, which
// then starts after the small one. Created together, both fit, and apply
// starts the small one first.
func TestServeAddedToFullHead(t *testing.T) {
	src := strings.Replace(string(benchConfig(2)), "pipeline_parallel_size = length(var.hosts)", "pipeline_parallel_size = 1", 1)
	cc := convergedFrom(t, []byte(src), nil)
	second := src + "\nvllm_serve \"second\" {\n  cluster = ray_cluster.main\n  model   = \"Qwen/Qwen3-0.6B\"\n  port    = 8001\n}\n"
	head := cc.facts.Hosts[`gpu["h1"]`]
	budget := func(cfg *Blocks, facts *observe.Facts, replace map[string]bool) (*Result, []plan.Finding) {
		res := Plan(PlanInput{Config: cfg, Facts: facts, Project: benchProject, Replace: replace})
		var out []plan.Finding
		for _, f := range res.Plan.Errors() {
			if strings.Contains(f.Summary, "GPU") {
				out = append(out, f)
			}
		}
		return res, out
	}

	for _, c := range []struct {
		name   string
		usage  bool
		detail string
	}{
		{"Ray reports the head full", true, `GPUs free as Ray reports them (ray status): gpu["h1"] 0 of 8, gpu["h2"] 8 of 8.`},
		{"no report from Ray: the running serve's placement estimated", false, `GPUs free, estimated (Ray's dashboard did not report its nodes' usage): gpu["h1"] 0 of 8, gpu["h2"] 8 of 8.`},
	} {
		t.Run(c.name, func(t *testing.T) {
			delete(head.HTTP, cluster.RayUsageURL(benchDashPort))
			if c.usage {
				setRayUsage(head, benchDashPort, map[string][2]float64{"192.168.0.10": {8, 8}, "192.168.0.11": {0, 8}})
			}
			cfg := planConfig(t, second, cc.facts)
			if got := ObserveSpec(cfg, nil, benchProject).Hosts[`gpu["h1"]`].HTTP; !slices.ContainsFunc(got, func(p observe.HTTPProbe) bool { return p.URL == cluster.RayUsageURL(benchDashPort) }) {
				t.Errorf("the head's probe does not ask Ray's usage (%s): %+v", cluster.RayUsageURL(benchDashPort), got)
			}
			res, f := budget(cfg, cc.facts, nil)
			if len(f) != 1 {
				t.Fatalf("want one GPU budget error, got %+v\n%+v", f, res.Plan.Changes)
			}
			want := `vllm_serve.second cannot start: its engine needs a free GPU on the head gpu["h1"], and Ray has 0 of its 8 GPUs free`
			if f[0].Summary != want || f[0].Address != "vllm_serve.second" || f[0].Host != `gpu["h1"]` {
				t.Errorf("summary %q (%s on %s), want %q", f[0].Summary, f[0].Address, f[0].Host, want)
			}
			for _, s := range []string{c.detail, "vllm_serve.llama (8)", "Current node has no GPU available"} {
				if !strings.Contains(f[0].Detail, s) {
					t.Errorf("detail lacks %q:\n%s", s, f[0].Detail)
				}
			}
			if want := "apply with -replace=vllm_serve.llama: rayform then restarts it and starts the serves smallest first (vllm_serve.second, vllm_serve.llama), so all fit"; f[0].Fix != want {
				t.Errorf("fix %q, want %q", f[0].Fix, want)
			}

			// The fix it gives works: with the running serve restarted,
			// the small one starts first, after the big one's stop.
			res, f = budget(cfg, cc.facts, map[string]bool{"vllm_serve.llama": true})
			if len(f) != 0 {
				t.Fatalf("with -replace: %+v", f)
			}
			if got := res.Work["vllm_serve.llama"].After; !slices.Equal(got, []string{"vllm_serve.second"}) {
				t.Errorf("vllm_serve.llama starts after %v, want [vllm_serve.second]", got)
			}
			if sw := serve.WorkOf(res.Work["vllm_serve.llama"]); sw == nil || sw.StopBefore != "vllm_serve.second" {
				t.Errorf("vllm_serve.llama's stop does not run before vllm_serve.second starts: %+v", sw)
			}
		})
	}

	// A serve whose process died is replaced; Ray's report may still count
	// its placement group's GPUs (it lags, and the group outlives its
	// driver until Ray notices): they come back to the replacement
	// (TestE2EApplyLifecycle's "plan after the serve died" refused it).
	t.Run("dead serve replaced while Ray still counts its GPUs", func(t *testing.T) {
		facts := convergedFrom(t, []byte(src), nil).facts
		rec := facts.Hosts[`gpu["h1"]`].Records["serve-llama"]
		rec.Alive = false
		facts.Hosts[`gpu["h1"]`].Records["serve-llama"] = rec
		setRayUsage(facts.Hosts[`gpu["h1"]`], benchDashPort, map[string][2]float64{"192.168.0.10": {8, 8}, "192.168.0.11": {0, 8}})
		res, f := budget(planConfig(t, src, facts), facts, nil)
		if i := slices.IndexFunc(res.Plan.Changes, func(c plan.ResourceChange) bool { return c.Address == "vllm_serve.llama" }); i < 0 || res.Plan.Changes[i].Action != plan.Replace {
			t.Fatalf("vllm_serve.llama is not replaced: %+v", res.Plan.Changes)
		}
		if len(f) != 0 {
			t.Fatalf("the dead serve's own GPUs refused to its replacement: %+v", f)
		}
	})

	t.Run("created together", func(t *testing.T) {
		facts := convergedFrom(t, []byte(src), nil).facts
		delete(facts.Hosts[`gpu["h1"]`].Records, "serve-llama")
		setRayUsage(facts.Hosts[`gpu["h1"]`], benchDashPort, map[string][2]float64{"192.168.0.10": {0, 8}, "192.168.0.11": {0, 8}})
		res, f := budget(planConfig(t, second, facts), facts, nil)
		if len(f) != 0 {
			t.Fatalf("created together: %+v", f)
		}
		if got := res.Work["vllm_serve.llama"].After; !slices.Equal(got, []string{"vllm_serve.second"}) {
			t.Errorf("vllm_serve.llama starts after %v, want [vllm_serve.second]", got)
		}
		if got := res.Work["vllm_serve.second"].After; len(got) != 0 {
			t.Errorf("vllm_serve.second starts after %v, want first", got)
		}
	})
}
