package kindstest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

// TestOutputsUnchangedValue is issue 33 item 8: an output that reads an
// attribute the plan's change list does not carry (a computed one:
// public_endpoint, address, dashboard_url; or an expression over them)
// was shown as changed, with its identical value, whenever its resource
// changed an exported attribute. The configuration now says which
// attributes an output reads (config.Output.Reads) and each computed
// attribute the arguments it derives from (config.Attr.From): an output
// changes only when one of those does.
func TestOutputsUnchangedValue(t *testing.T) {
	cc := convergedCluster(t, 2)
	src := string(benchConfig(2)) + `
output "public" {
  value = vllm_serve.llama.public_endpoint
}
output "url" {
  value = "${vllm_serve.llama.endpoint}/chat"
}
output "ray_address" {
  value = ray_cluster.main.address
}
`
	st, err := state.New(benchProject)
	if err != nil {
		t.Fatal(err)
	}
	st.Set("ray_cluster.main", state.Resource{Type: "ray_cluster"})
	st.Set("vllm_serve.llama", state.Resource{Type: "vllm_serve"})
	outputs := func(src string) string {
		cfg := planConfig(t, src, cc.facts)
		res := Plan(PlanInput{Config: cfg, Facts: cc.facts, Project: benchProject, State: st})
		var b bytes.Buffer
		if err := plan.RenderText(&b, res.Plan, plan.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if i := strings.Index(out, "Changes to Outputs:"); i >= 0 {
			return out[i:]
		}
		return ""
	}
	// The serve restarts with another parallelism and the cluster with
	// another env: every output keeps its value.
	tp := strings.Replace(src, "tensor_parallel_size   = 8", "tensor_parallel_size   = 4", 1)
	if got := outputs(tp); got != "" {
		t.Errorf("outputs shown as changed, their values the same:\n%s", got)
	}
	if got := outputs(strings.Replace(tp, "HF_TOKEN = var.hf_token", "HF_TOKEN = var.hf_token\n    FOO = \"1\"", 1)); got != "" {
		t.Errorf("outputs shown as changed, their values the same:\n%s", got)
	}
	// Another image replaces the cluster (and the serve): its address is
	// the same.
	if got := outputs(strings.Replace(src, "v0.11.0", "v0.11.1", 1)); got != "" {
		t.Errorf("outputs shown as changed, their values the same:\n%s", got)
	}
	// What each output reads, as the configuration says.
	cfg := planConfig(t, src, cc.facts)
	for name, want := range map[string]string{"public": "vllm_serve.llama.public_endpoint", "url": "vllm_serve.llama.endpoint", "ray_address": "ray_cluster.main.address"} {
		var got []string
		for addr, attrs := range cfg.Outputs[name].Reads {
			for _, a := range attrs {
				got = append(got, addr+"."+a)
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("output %s reads %v, want %s", name, got, want)
		}
	}
	// Another port: the serve's URLs change.
	got := outputs(strings.Replace(src, "max_model_len          = 32768", "max_model_len          = 32768\n  port                   = 8001", 1))
	for _, want := range []string{`~ endpoint = "http://192.168.0.10:8000/v1" -> "http://192.168.0.10:8001/v1"`, `~ public   = "http://10.1.230.10:8001/v1"`, `~ url      = "http://192.168.0.10:8001/v1/chat"`} {
		if !strings.Contains(got, want) {
			t.Errorf("outputs lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "ray_address") {
		t.Errorf("ray_address shown as changed:\n%s", got)
	}
}
