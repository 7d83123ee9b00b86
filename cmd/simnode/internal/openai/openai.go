// Package openai is the OpenAI-compatible HTTP server a loaded `vllm serve`
// exposes: /health, /ping, /version, /v1/models, /v1/completions and
// /v1/chat/completions (including stream: true server-sent events ending
// with "data: [DONE]"), and Prometheus /metrics with vllm: metric names.
// Tokens are produced at a configured rate.
package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
)

// Config describes the served model.
type Config struct {
	// Model is the model path (ModelCard.root).
	Model string
	// Served are the --served-model-name values (default [Model]).
	Served          []string
	MaxModelLen     int
	TokensPerSecond float64
	APIKey          string
	Version         string
	// Created is the ModelCard creation time.
	Created time.Time
	Now     func() time.Time
	// AccessLog receives uvicorn's access lines ("127.0.0.1:5000 - \"GET
	// /health HTTP/1.1\" 200 OK").
	AccessLog func(string)
	// KVCacheTokens sizes vllm:kv_cache_usage_perc.
	KVCacheTokens int
}

type server struct {
	cfg                 Config
	running, waiting    atomic.Int64
	promptTok, genTok   atomic.Int64
	mu                  sync.Mutex
	finished            map[string]int64
	ttftCount, ttftSumN atomic.Int64
}

// Handler returns the server's routes.
func Handler(cfg Config) http.Handler {
	if len(cfg.Served) == 0 {
		cfg.Served = []string{cfg.Model}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TokensPerSecond <= 0 {
		cfg.TokensPerSecond = 30
	}
	s := &server{cfg: cfg, finished: map[string]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, kv{{"version", cfg.Version}})
	})
	mux.HandleFunc("/v1/models", s.auth(s.models))
	mux.HandleFunc("/v1/completions", s.auth(s.completions))
	mux.HandleFunc("/v1/chat/completions", s.auth(s.chat))
	mux.HandleFunc("/metrics", s.metrics)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, kv{{"detail", "Not Found"}})
	})
	return s.accessLog(mux)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(c int) {
	w.code = c
	w.ResponseWriter.WriteHeader(c)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *server) accessLog(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		if s.cfg.AccessLog != nil {
			s.cfg.AccessLog(fmt.Sprintf("%s - \"%s %s HTTP/%d.%d\" %d %s", r.RemoteAddr, r.Method, r.URL.RequestURI(), r.ProtoMajor, r.ProtoMinor, sw.code, http.StatusText(sw.code)))
		}
	})
}

func (s *server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.cfg.APIKey {
			writeJSON(w, http.StatusUnauthorized, kv{{"error", "Unauthorized"}})
			return
		}
		h(w, r)
	}
}

// writeJSON writes v as FastAPI's JSONResponse does: compact, fields in
// the pydantic models' order.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprint(w, pylog.JSON(toPy(v), true))
}

// kv is an ordered JSON object (a pydantic model's fields in order).
type kv []pair

type pair struct {
	k string
	v any
}

// toPy converts kv values (recursively) for pylog.JSON.
func toPy(v any) any {
	switch x := v.(type) {
	case kv:
		out := make(pylog.KV, len(x))
		for i, p := range x {
			out[i] = pylog.Pair{Key: p.k, Value: toPy(p.v)}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toPy(e)
		}
		return out
	}
	return v
}

func apiError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, kv{{"error", kv{{"message", msg}, {"type", typ}, {"param", nil}, {"code", code}}}})
}

func usageKV(u usage) kv {
	return kv{{"prompt_tokens", u.PromptTokens}, {"total_tokens", u.TotalTokens}, {"completion_tokens", u.CompletionTokens}, {"prompt_tokens_details", nil}}
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *server) models(w http.ResponseWriter, r *http.Request) {
	var data []any
	created := s.cfg.Created.Unix()
	for _, name := range s.cfg.Served {
		perm := kv{{"id", "modelperm-" + randomID()}, {"object", "model_permission"}, {"created", created}, {"allow_create_engine", false}, {"allow_sampling", true}, {"allow_logprobs", true}, {"allow_search_indices", false}, {"allow_view", true}, {"allow_fine_tuning", false}, {"organization", "*"}, {"group", nil}, {"is_blocking", false}}
		data = append(data, kv{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "vllm"}, {"root", s.cfg.Model}, {"parent", nil}, {"max_model_len", s.cfg.MaxModelLen}, {"permission", []any{perm}}})
	}
	writeJSON(w, http.StatusOK, kv{{"object", "list"}, {"data", data}})
}

var tokenRE = regexp.MustCompile(`\w+|[^\w\s]`)

// countTokens approximates a tokenizer: one token per word or symbol.
func countTokens(s string) int { return len(tokenRE.FindAllString(s, -1)) }

var vocabulary = strings.Fields("The quick brown fox jumps over the lazy dog . Ray and vLLM serve the model across two nodes over the fabric , and every token arrives in order .")

func token(i int) string {
	w := vocabulary[i%len(vocabulary)]
	if i == 0 || w == "." || w == "," {
		return w
	}
	return " " + w
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type request struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Messages      []message       `json:"messages"`
	MaxTokens     *int            `json:"max_tokens"`
	MaxCompletion *int            `json:"max_completion_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (s *server) checkModel(w http.ResponseWriter, req *request) (string, bool) {
	if req.Model == "" {
		return s.cfg.Served[0], true
	}
	for _, n := range s.cfg.Served {
		if n == req.Model {
			return n, true
		}
	}
	writeJSON(w, http.StatusNotFound, kv{{"error", kv{{"message", fmt.Sprintf("The model `%s` does not exist.", req.Model)}, {"type", "NotFoundError"}, {"param", "model"}, {"code", 404}}}})
	return "", false
}

// generate produces n tokens at the configured rate, calling each per token.
func (s *server) generate(ctx context.Context, n int, each func(i int, tok string) bool) int {
	s.running.Add(1)
	defer s.running.Add(-1)
	per := time.Duration(float64(time.Second) / s.cfg.TokensPerSecond)
	t := time.NewTicker(per)
	defer t.Stop()
	for i := 0; i < n; i++ {
		select {
		case <-ctx.Done():
			return i
		case <-t.C:
		}
		s.genTok.Add(1)
		if !each(i, token(i)) {
			return i + 1
		}
	}
	return n
}

func (s *server) finish(reason string) {
	s.mu.Lock()
	s.finished[reason]++
	s.mu.Unlock()
}

func (s *server) budget(w http.ResponseWriter, prompt int, max *int, def int) (int, string, bool) {
	n, reason := def, "stop"
	if max != nil {
		n, reason = *max, "length"
	}
	if prompt+n > s.cfg.MaxModelLen {
		if max == nil {
			n = s.cfg.MaxModelLen - prompt
		} else {
			apiError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", s.cfg.MaxModelLen, prompt+n, prompt, n))
			return 0, "", false
		}
	}
	return max0(n), reason, true
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

func sse(w http.ResponseWriter, v any) {
	fmt.Fprintf(w, "data: %s\n\n", pylog.JSON(toPy(v), true))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *server) completions(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, kv{{"detail", "Method Not Allowed"}})
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	model, ok := s.checkModel(w, &req)
	if !ok {
		return
	}
	var prompt string
	if json.Unmarshal(req.Prompt, &prompt) != nil {
		var list []string
		_ = json.Unmarshal(req.Prompt, &list)
		prompt = strings.Join(list, "")
	}
	pt := max(countTokens(prompt), 1)
	n, reason, ok := s.budget(w, pt, req.MaxTokens, 16)
	if !ok {
		return
	}
	if req.MaxTokens == nil {
		reason = "length"
	}
	s.promptTok.Add(int64(pt))
	id := "cmpl-" + randomID()
	created := s.cfg.Now().Unix()
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		got := s.generate(r.Context(), n, func(i int, tok string) bool {
			var fr any
			if i == n-1 {
				fr = reason
			}
			sse(w, kv{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", []any{kv{{"index", 0}, {"text", tok}, {"logprobs", nil}, {"finish_reason", fr}, {"stop_reason", nil}}}}})
			return true
		})
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			sse(w, kv{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", []any{}}, {"usage", usageKV(usage{pt, pt + got, got})}})
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		s.finish(reason)
		return
	}
	var text strings.Builder
	got := s.generate(r.Context(), n, func(i int, tok string) bool { text.WriteString(tok); return true })
	s.finish(reason)
	writeJSON(w, http.StatusOK, kv{
		{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
		{"choices", []any{kv{{"index", 0}, {"text", text.String()}, {"logprobs", nil}, {"finish_reason", reason}, {"stop_reason", nil}, {"prompt_logprobs", nil}}}},
		{"service_tier", nil}, {"system_fingerprint", nil},
		{"usage", usageKV(usage{pt, pt + got, got})},
		{"kv_transfer_params", nil},
	})
}

func (s *server) chat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, kv{{"detail", "Method Not Allowed"}})
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	model, ok := s.checkModel(w, &req)
	if !ok {
		return
	}
	pt := 0
	for _, m := range req.Messages {
		pt += countTokens(contentText(m.Content)) + 4
	}
	pt = max(pt, 1)
	limit := req.MaxTokens
	if req.MaxCompletion != nil {
		limit = req.MaxCompletion
	}
	// Without a limit the simulated model stops (EOS) after a sentence.
	n, reason, ok := s.budget(w, pt, limit, 24)
	if !ok {
		return
	}
	s.promptTok.Add(int64(pt))
	id := "chatcmpl-" + randomID()
	created := s.cfg.Now().Unix()
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		chunk := func(delta kv, fr any) kv {
			return kv{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}, {"choices", []any{kv{{"index", 0}, {"delta", delta}, {"logprobs", nil}, {"finish_reason", fr}}}}}
		}
		sse(w, chunk(kv{{"role", "assistant"}, {"content", ""}}, nil))
		got := s.generate(r.Context(), n, func(i int, tok string) bool {
			var fr any
			if i == n-1 {
				fr = reason
			}
			sse(w, chunk(kv{{"content", tok}}, fr))
			return true
		})
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			sse(w, kv{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}, {"choices", []any{}}, {"usage", usageKV(usage{pt, pt + got, got})}})
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		s.finish(reason)
		return
	}
	var text strings.Builder
	got := s.generate(r.Context(), n, func(i int, tok string) bool { text.WriteString(tok); return true })
	s.finish(reason)
	msg := kv{{"role", "assistant"}, {"content", text.String()}, {"refusal", nil}, {"annotations", nil}, {"audio", nil}, {"function_call", nil}, {"tool_calls", []any{}}, {"reasoning_content", nil}}
	writeJSON(w, http.StatusOK, kv{
		{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model},
		{"choices", []any{kv{{"index", 0}, {"message", msg}, {"logprobs", nil}, {"finish_reason", reason}, {"stop_reason", nil}}}},
		{"service_tier", nil}, {"system_fingerprint", nil},
		{"usage", usageKV(usage{pt, pt + got, got})},
		{"prompt_logprobs", nil}, {"kv_transfer_params", nil},
	})
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	lbl := fmt.Sprintf(`{engine="0",model_name="%s"}`, s.cfg.Served[0])
	kv := 0.0
	if s.cfg.KVCacheTokens > 0 {
		kv = float64(s.running.Load()) * 64 / float64(s.cfg.KVCacheTokens)
	}
	fmt.Fprintf(w, "# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running%s %d.0\n", lbl, s.running.Load())
	fmt.Fprintf(w, "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting%s %d.0\n", lbl, s.waiting.Load())
	fmt.Fprintf(w, "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc%s %g\n", lbl, kv)
	fmt.Fprintf(w, "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total%s %d.0\n", lbl, s.promptTok.Load())
	fmt.Fprintf(w, "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total%s %d.0\n", lbl, s.genTok.Load())
	fmt.Fprintf(w, "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total%s 0.0\n", lbl)
	s.mu.Lock()
	fmt.Fprintf(w, "# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter\n")
	for _, reason := range []string{"abort", "length", "stop"} {
		fmt.Fprintf(w, "vllm:request_success_total{engine=\"0\",finished_reason=\"%s\",model_name=\"%s\"} %d.0\n", reason, s.cfg.Served[0], s.finished[reason])
	}
	s.mu.Unlock()
	fmt.Fprintf(w, "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",engine=\"0\",num_gpu_blocks=\"%d\"} 1.0\n", s.cfg.KVCacheTokens/16)
}
