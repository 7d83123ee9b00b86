package serve

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/observe"
)

// TestServeMetricsAndUptime reads what status shows of a serve from the
// head's probe: vLLM's /metrics (counters summed over their labels, as
// simnode and vLLM print them) and the uptime from the pid file's mtime
// and the head's clock.
func TestServeMetricsAndUptime(t *testing.T) {
	const body = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 1.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.125
vllm:prompt_tokens_total{engine="0",model_name="qwen"} 30.0
vllm:generation_tokens_total{engine="0",model_name="qwen"} 250.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="qwen"} 1.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="qwen"} 3.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="qwen"} 2.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="100"} 1.0
`
	spec := ServeSpec{Name: "qwen", Container: "rayform-spark", Node: "spark1"}
	started := time.Unix(1796130000, 0).UTC()
	hf := &observe.HostFacts{
		HTTP:  map[string]observe.HTTPResult{ServeURL(8000, "/metrics"): {HTTPCheck: observe.HTTPCheck{Status: 200}, Body: body}},
		Files: map[string]observe.FileFacts{spec.HostPidPath("lab"): {Exists: true, ModTime: started}},
		Clock: started.Add(100 * time.Second),
	}
	uptime := ServeUptime(hf, spec, "lab")
	if uptime != 100*time.Second {
		t.Errorf("uptime %s, want 100s", uptime)
	}
	m := ServeMetrics(hf, 8000, uptime)
	kv := 0.125
	want := VLLMMetrics{RequestsFinished: 6, RequestsRunning: 1, RequestsWaiting: 2, PromptTokens: 30, GenerationTokens: 250, TokensPerSecond: 2.5, KVCacheUsage: &kv}
	if m == nil || !reflect.DeepEqual(*m, want) {
		t.Errorf("metrics %+v, want %+v", m, want)
	}
	var out strings.Builder
	ServeStatus{Address: "vllm_serve.qwen", Node: "spark1", Health: HealthOK, HealthDetail: "/health 200", Metrics: m}.render(&out)
	if !strings.Contains(out.String(), "  kv cache  12.5% used\n") {
		t.Errorf("status shows no KV cache usage:\n%s", out.String())
	}
	// Several engines (data parallel): the fullest one's usage, not a sum.
	two := parseVLLMMetrics("vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.5\n")
	if two == nil || two.KVCacheUsage == nil || *two.KVCacheUsage != 0.5 {
		t.Errorf("two engines' KV cache usage: %+v, want 0.5", two)
	}
	// A vLLM without the gauge: no usage made up, and none shown.
	none := parseVLLMMetrics("vllm:num_requests_running 0\n")
	out.Reset()
	ServeStatus{Metrics: none}.render(&out)
	if none == nil || none.KVCacheUsage != nil || strings.Contains(out.String(), "kv cache") {
		t.Errorf("without vllm:kv_cache_usage_perc: %+v\n%s", none, out.String())
	}
	// No pid file, no metrics (not probed, or not vLLM's): nothing made up.
	empty := &observe.HostFacts{Clock: hf.Clock, HTTP: map[string]observe.HTTPResult{ServeURL(8000, "/metrics"): {HTTPCheck: observe.HTTPCheck{Status: 200}, Body: "other 1\n"}}}
	if u, m := ServeUptime(empty, spec, "lab"), ServeMetrics(empty, 8000, 0); u != 0 || m != nil {
		t.Errorf("without a pid file or vLLM's metrics: uptime %s, metrics %+v", u, m)
	}
}
