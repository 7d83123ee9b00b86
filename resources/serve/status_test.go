package serve

import (
	"encoding/json"
	"reflect"
	"slices"
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

// TestVLLMMetricsHostile: /metrics as a broken or hostile vLLM may write
// it. A sample that is not a finite number (NaN, ±Inf), or a sum that
// overflows, is left out with a note: status -json encodes the report
// (it exited 1, "unsupported value: NaN"), and the text says so. A line
// longer than metricsLineMax is skipped with a note and the lines after
// it are still read (bufio.Scanner stopped at 64 KiB, silently). Notes
// name the metric, never quote the line.
func TestVLLMMetricsHostile(t *testing.T) {
	long := `vllm:num_requests_running{junk="` + strings.Repeat("x", 70<<10) + `"} 9` + "\n"
	tests := []struct {
		name  string
		body  string
		want  VLLMMetrics // Notes checked by note
		note  string
		kvNil bool
	}{
		{name: "NaN gauge", body: "vllm:kv_cache_usage_perc{engine=\"0\"} NaN\nvllm:num_requests_running 1\n",
			want: VLLMMetrics{RequestsRunning: 1}, note: "vllm:kv_cache_usage_perc: a sample is NaN: left out", kvNil: true},
		{name: "NaN beside a number", body: "vllm:kv_cache_usage_perc{engine=\"0\"} NaN\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.5\n",
			want: VLLMMetrics{KVCacheUsage: ptr(0.5)}, note: "vllm:kv_cache_usage_perc: a sample is NaN: left out"},
		{name: "+Inf counter", body: "vllm:prompt_tokens_total{a=\"1\"} +Inf\nvllm:prompt_tokens_total{a=\"2\"} 5\n",
			want: VLLMMetrics{PromptTokens: 5}, note: "vllm:prompt_tokens_total: a sample is +Inf: left out", kvNil: true},
		{name: "-Inf gauge", body: "vllm:num_requests_waiting -Inf\n",
			want: VLLMMetrics{}, note: "vllm:num_requests_waiting: a sample is -Inf: left out", kvNil: true},
		{name: "sum overflows", body: "vllm:generation_tokens_total{a=\"1\"} 1e308\nvllm:generation_tokens_total{a=\"2\"} 1e308\n",
			want: VLLMMetrics{}, note: "vllm:generation_tokens_total: the sum is not a finite number: left out", kvNil: true},
		{name: "line over 64 KiB", body: long + "vllm:generation_tokens_total 7\n",
			want: VLLMMetrics{GenerationTokens: 7}, note: "1 line of /metrics longer than 65536 bytes skipped", kvNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := parseVLLMMetrics(tt.body)
			if m == nil {
				t.Fatal("no metrics read")
			}
			got := *m
			got.Notes = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("metrics %+v, want %+v", got, tt.want)
			}
			if !slices.Contains(m.Notes, tt.note) {
				t.Errorf("notes %q lack %q", m.Notes, tt.note)
			}
			ss := ServeStatus{Address: "vllm_serve.qwen", Health: HealthOK, Metrics: m}
			js, err := json.Marshal(ss)
			if err != nil {
				t.Fatalf("status -json: %v", err)
			}
			var out strings.Builder
			ss.render(&out)
			if !strings.Contains(out.String(), tt.note) {
				t.Errorf("text lacks the note %q:\n%s", tt.note, out.String())
			}
			if len(js) > 4096 || out.Len() > 4096 {
				t.Errorf("the report quotes the answer: %d bytes of JSON, %d of text", len(js), out.Len())
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }
