package openai

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func newServer(t *testing.T, key string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(Config{Model: "Qwen/Qwen3.5-122B-A10B-FP8", Served: []string{"qwen"}, MaxModelLen: 64, TokensPerSecond: 10000, APIKey: key, Version: "0.17.1", Created: time.Unix(1777903758, 0), KVCacheTokens: 1024}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Shapes from ray-vllm-facts.md §3.5.
func TestEndpoints(t *testing.T) {
	srv := newServer(t, "")
	tests := []struct {
		name, method, path, body string
		code                     int
		check                    func(t *testing.T, body string)
	}{
		{"health", "GET", "/health", "", 200, func(t *testing.T, b string) {
			if b != "" {
				t.Errorf("health body %q, want empty", b)
			}
		}},
		{"version", "GET", "/version", "", 200, func(t *testing.T, b string) {
			if !strings.Contains(b, `"version":"0.17.1"`) {
				t.Errorf("version body %s", b)
			}
		}},
		{"models", "GET", "/v1/models", "", 200, func(t *testing.T, b string) {
			// Field order and compact separators of ray-vllm-facts.md §3.5's sample.
			prefix := `{"object":"list","data":[{"id":"qwen","object":"model","created":1777903758,"owned_by":"vllm","root":"Qwen/Qwen3.5-122B-A10B-FP8","parent":null,"max_model_len":64,"permission":[{"id":"modelperm-`
			if !strings.HasPrefix(b, prefix) || !strings.HasSuffix(b, `"object":"model_permission","created":1777903758,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]}]}`) {
				t.Errorf("models body %s", b)
			}
			var m struct {
				Object string `json:"object"`
				Data   []struct {
					ID          string `json:"id"`
					Root        string `json:"root"`
					OwnedBy     string `json:"owned_by"`
					MaxModelLen int    `json:"max_model_len"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(b), &m); err != nil {
				t.Fatal(err)
			}
			if m.Object != "list" || len(m.Data) != 1 || m.Data[0].ID != "qwen" || m.Data[0].Root != "Qwen/Qwen3.5-122B-A10B-FP8" || m.Data[0].OwnedBy != "vllm" || m.Data[0].MaxModelLen != 64 {
				t.Errorf("models = %+v", m)
			}
		}},
		{"completion", "POST", "/v1/completions", `{"model":"qwen","prompt":"Hello there, world","max_tokens":5}`, 200, func(t *testing.T, b string) {
			var r struct {
				Object  string `json:"object"`
				Choices []struct {
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
				Usage usage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(b), &r); err != nil {
				t.Fatal(err)
			}
			if r.Object != "text_completion" || r.Choices[0].FinishReason != "length" || r.Usage != (usage{PromptTokens: 4, TotalTokens: 9, CompletionTokens: 5}) || r.Choices[0].Text != "The quick brown fox jumps" {
				t.Errorf("completion = %s", b)
			}
		}},
		{"chat", "POST", "/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"Hi"}],"max_tokens":3}`, 200, func(t *testing.T, b string) {
			if !strings.Contains(b, `"object":"chat.completion"`) || !strings.Contains(b, `"completion_tokens":3`) || !strings.Contains(b, `"role":"assistant"`) {
				t.Errorf("chat = %s", b)
			}
		}},
		{"unknown model", "POST", "/v1/completions", `{"model":"gpt-4","prompt":"x"}`, 404, func(t *testing.T, b string) {
			if !strings.Contains(b, "The model `gpt-4` does not exist.") {
				t.Errorf("body %s", b)
			}
		}},
		{"context too long", "POST", "/v1/completions", `{"model":"qwen","prompt":"a b c","max_tokens":100}`, 400, func(t *testing.T, b string) {
			if !strings.Contains(b, "This model's maximum context length is 64 tokens. However, you requested 103 tokens (3 in the messages, 100 in the completion).") {
				t.Errorf("body %s", b)
			}
		}},
		{"metrics", "GET", "/metrics", "", 200, func(t *testing.T, b string) {
			for _, m := range []string{"vllm:num_requests_running{", "vllm:num_requests_waiting{", "vllm:kv_cache_usage_perc{", "vllm:prompt_tokens_total{", "vllm:generation_tokens_total{", "# TYPE vllm:num_requests_running gauge"} {
				if !strings.Contains(b, m) {
					t.Errorf("metrics lack %q", m)
				}
			}
		}},
		{"not found", "GET", "/nope", "", 404, func(t *testing.T, b string) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, tt.method, srv.URL+tt.path, tt.body, map[string]string{"Content-Type": "application/json"})
			if code != tt.code {
				t.Fatalf("status %d, want %d (%s)", code, tt.code, body)
			}
			tt.check(t, body)
		})
	}
}

func TestStreaming(t *testing.T) {
	srv := newServer(t, "")
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			body := `{"model":"qwen","prompt":"x","messages":[{"role":"user","content":"x"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`
			resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("content type %q", ct)
			}
			var events []string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if l := sc.Text(); strings.HasPrefix(l, "data: ") {
					events = append(events, strings.TrimPrefix(l, "data: "))
				}
			}
			if len(events) < 3 || events[len(events)-1] != "[DONE]" {
				t.Fatalf("events %q: want chunks ending with [DONE]", events)
			}
			if !strings.Contains(events[len(events)-2], `"completion_tokens":4`) {
				t.Errorf("usage chunk %s", events[len(events)-2])
			}
		})
	}
}

func TestAPIKey(t *testing.T) {
	srv := newServer(t, "secret")
	if code, _ := do(t, "GET", srv.URL+"/v1/models", "", nil); code != 401 {
		t.Errorf("no key: status %d, want 401", code)
	}
	if code, _ := do(t, "GET", srv.URL+"/v1/models", "", map[string]string{"Authorization": "Bearer secret"}); code != 200 {
		t.Errorf("with key: status %d, want 200", code)
	}
	if code, _ := do(t, "GET", srv.URL+"/health", "", nil); code != 200 {
		t.Errorf("health needs no key: status %d", code)
	}
}
