package main

import (
	"testing"
)

// TestParseServeStatus reads what status's command on the head prints: the
// pid file's mtime, the host's clock, then vLLM's /metrics (counters summed
// over their labels, as simnode and vLLM print them).
func TestParseServeStatus(t *testing.T) {
	out := `1796130000
1796130100
---
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 1.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 2.0
vllm:prompt_tokens_total{engine="0",model_name="qwen"} 30.0
vllm:generation_tokens_total{engine="0",model_name="qwen"} 250.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="qwen"} 1.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="qwen"} 3.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="qwen"} 2.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="100"} 1.0
`
	started, now, m := parseServeStatus([]byte(out))
	if started != 1796130000 || now != 1796130100 {
		t.Errorf("started %d, now %d", started, now)
	}
	want := serveMetrics{RequestsFinished: 6, RequestsRunning: 1, RequestsWaiting: 2, PromptTokens: 30, GenerationTokens: 250}
	if m == nil || *m != want {
		t.Errorf("metrics %+v, want %+v", m, want)
	}
	// No pid file, no metrics (the serve is not healthy): nothing made up.
	started, _, m = parseServeStatus([]byte("-\n1796130100\n---\n"))
	if started != 0 || m != nil {
		t.Errorf("without a pid file or metrics: started %d, metrics %+v", started, m)
	}
}
