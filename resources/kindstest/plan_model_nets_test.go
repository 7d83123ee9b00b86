package kindstest

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/stepenv"
)

// twoNetworksConfig is modelConfig over 4 hosts, with h3 and h4 taken
// out of cluster main into cluster b, on network b's subnet, which serves
// the same model block.
func twoNetworksConfig() string {
	src := string(benchConfig(4))
	src = strings.Replace(src, `model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"`, `model                  = model.llama.source`, 1)
	src = strings.Replace(src, `workers        = [for k, n in node.gpu : n if k != "h1"]`, `workers        = [node.gpu["h2"]]`, 1)
	src = strings.Replace(src, `pipeline_parallel_size = length(var.hosts)`, `pipeline_parallel_size = 2`, 1)
	return src + `
network "b" {
  cidr      = "10.20.0.0/24"
  interface = "ib0"
}

ray_cluster "b" {
  image          = "vllm/vllm-openai:v0.11.0"
  head           = node.gpu["h3"]
  workers        = [node.gpu["h4"]]
  network        = network.b
  shm_size       = "64g"
  memory_monitor = false
}

vllm_serve "b" {
  cluster                = ray_cluster.b
  model                  = model.llama.source
  served_model_name      = "llama-b"
  tensor_parallel_size   = 8
  pipeline_parallel_size = 2
  max_model_len          = 32768
  port                   = 8001
}

model "llama" {
  source    = "meta-llama/Llama-3.1-405B-Instruct-FP8"
  cache_dir = "/data/hf/hub"
  token     = var.hf_token
}
`
}

// TestPlanModelTwoNetworks: two clusters on two networks serve one model.
// A node receives it from a node with a complete copy on its own network
// (never over another network's fabric); a network where no node has it
// downloads it once from the hub, the rest of it receiving from that node;
// each node's line names its source. Goldens
// testdata/plan/model-two-networks*.
func TestPlanModelTwoNetworks(t *testing.T) {
	mf := modelManifest()
	dir := "/data/hf/hub/" + model.CacheDirName(mf.Repo)
	all := func(model.File) bool { return true }
	none := func(model.File) bool { return false }
	for _, tc := range []struct {
		name  string
		trees map[string]observe.TreeFacts
		want  []string
		steps string
	}{
		{name: "model-two-networks",
			trees: map[string]observe.TreeFacts{`gpu["h1"]`: modelTree(mf, all, 1e12), `gpu["h2"]`: modelTree(mf, none, 1e12), `gpu["h3"]`: modelTree(mf, none, 1e12), `gpu["h4"]`: modelTree(mf, none, 1e12)},
			want: []string{`gpu["h2"]: absent, 410.0 GB to stage from gpu["h1"] over network fabric`,
				`gpu["h3"]: absent, 410.0 GB to stage, downloaded from the hub`,
				`gpu["h4"]: absent, 410.0 GB to stage from gpu["h3"] over network b, once it has downloaded it`},
			steps: `stage meta-llama/Llama-3.1-405B-Instruct-FP8 (410.0 GB) from gpu["h1"] to gpu["h2"] over the fabric|` +
				`download meta-llama/Llama-3.1-405B-Instruct-FP8@0123456789ab (410.0 GB) to gpu["h3"] from the hub https://huggingface.co|` +
				`stage meta-llama/Llama-3.1-405B-Instruct-FP8 (410.0 GB) from gpu["h3"] to gpu["h4"] over the fabric`},
		{name: "model-two-networks-each-has-it",
			trees: map[string]observe.TreeFacts{`gpu["h1"]`: modelTree(mf, all, 1e12), `gpu["h2"]`: modelTree(mf, none, 1e12), `gpu["h3"]`: modelTree(mf, none, 1e12), `gpu["h4"]`: modelTree(mf, all, 1e12)},
			want: []string{`gpu["h2"]: absent, 410.0 GB to stage from gpu["h1"] over network fabric`,
				`gpu["h3"]: absent, 410.0 GB to stage from gpu["h4"] over network b`},
			// The nodes in the order of the serves that load the model (b,
			// then llama), each cluster's head first.
			steps: `stage meta-llama/Llama-3.1-405B-Instruct-FP8 (410.0 GB) from gpu["h4"] to gpu["h3"] over the fabric|` +
				`stage meta-llama/Llama-3.1-405B-Instruct-FP8 (410.0 GB) from gpu["h1"] to gpu["h2"] over the fabric`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := convergedFrom(t, []byte(modelConfig4()), nil)
			// h3 and h4 moved to network b: their fabric addresses there.
			for i, n := range []string{`gpu["h3"]`, `gpu["h4"]`} {
				hf := cc.facts.Hosts[n]
				a := netip.AddrFrom4([4]byte{10, 20, 0, byte(3 + i)})
				for j, ad := range hf.Addresses.List {
					if ad.Interface == "ib0" {
						hf.Addresses.List[j].Prefix = netip.PrefixFrom(a, 24)
					}
				}
				for j, r := range hf.Routes.List {
					if r.Dev == "ib0" {
						hf.Routes.List[j] = observe.Route{Dst: "10.20.0.0/24", Dev: "ib0", PrefSrc: a, Protocol: "kernel", Scope: "link"}
					}
				}
				hf.RouteChecks = nil
			}
			for n, tr := range tc.trees {
				cc.facts.Hosts[n].Trees = map[string]observe.TreeFacts{dir: tr}
			}
			st, err := state.New(benchProject)
			if err != nil {
				t.Fatal(err)
			}
			cfg := planConfig(t, twoNetworksConfig(), cc.facts)
			useResolution(cfg, "llama", model.Resolution{Manifest: mf})
			res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject})
			var txt, js bytes.Buffer
			if err := plan.RenderText(&txt, res.Plan, plan.TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := plan.RenderJSON(&js, res.Plan, plan.JSONOptions{Version: "test", Now: func() time.Time { return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) }}); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.want {
				if !strings.Contains(txt.String(), s) {
					t.Errorf("plan lacks %q\n%s", s, txt.String())
				}
			}
			w := res.Work["model.llama"]
			if w == nil {
				t.Fatalf("no work for the model:\n%s", txt.String())
			}
			var names []string
			for _, st := range PrepareSteps(&stepenv.StepEnv{}, w) {
				names = append(names, st.Name())
			}
			if got := strings.Join(names, "|"); got != tc.steps {
				t.Errorf("prepare steps\n%s\nwant\n%s", strings.ReplaceAll(got, "|", "\n"), strings.ReplaceAll(tc.steps, "|", "\n"))
			}
			golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".txt"), txt.Bytes())
			golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".json"), js.Bytes())
		})
	}
}

// modelConfig4 is modelConfig over 4 hosts: the cluster the facts are
// built from.
func modelConfig4() string {
	src := string(benchConfig(4))
	src = strings.Replace(src, `model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"`, `model                  = model.llama.source`, 1)
	return src + `
model "llama" {
  source    = "meta-llama/Llama-3.1-405B-Instruct-FP8"
  cache_dir = "/data/hf/hub"
  token     = var.hf_token
}
`
}
