package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/argparse"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/openai"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/resources/vllmcli"
)

// defaultModel is what `vllm serve` serves without a model argument.
const defaultModel = "Qwen/Qwen3-0.6B"

// nonDefaultArgs renders vLLM's "non-default args" dict.
func nonDefaultArgs(parser *argparse.Parser, res *argparse.Result, model string) string {
	kv := pylog.KV{}
	if res.Positional != "" {
		kv = append(kv, pylog.Pair{Key: "model_tag", Value: res.Positional})
	}
	types := map[string]argparse.Option{}
	for _, o := range parser.Options {
		types[o.Dest()] = o
	}
	for _, d := range res.Set() {
		o := types[d]
		var v any = res.Get(d)
		switch {
		case o.Action == vllmcli.Many || o.Action == vllmcli.Append:
			v = res.List(d)
		case o.Action == vllmcli.StoreTrue || o.Action == vllmcli.BoolOpt:
			v = res.Bool(d)
		case o.Type == vllmcli.Int || o.Type == vllmcli.HumanInt:
			v = res.Int(d)
		case o.Type == vllmcli.Float:
			v = res.Float(d)
		}
		kv = append(kv, pylog.Pair{Key: d, Value: v})
	}
	if !res.IsSet("model") {
		kv = append(kv, pylog.Pair{Key: "model", Value: model})
	}
	return pylog.Repr(kv)
}

func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func rayOnPath(env sim.Env) bool {
	for _, dir := range filepath.SplitList(env.Get("PATH")) {
		if st, err := os.Stat(filepath.Join(dir, "ray")); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}

func serve(ctx context.Context, p *sim.Proc, parser *argparse.Parser, res *argparse.Result) int {
	mu := &sync.Mutex{}
	api := &plog{mu: mu, out: p.Stdout, err: p.Stderr, now: p.Now, prefix: fmt.Sprintf("(APIServer pid=%d) ", p.Pid)}
	core := &plog{mu: mu, out: p.Stdout, err: p.Stderr, now: p.Now, prefix: fmt.Sprintf("(EngineCore_DP0 pid=%d) ", p.Pid)}
	apiFail := func(excType, msg string) int {
		api.Raw("Traceback (most recent call last):")
		for _, l := range []string{`  File "/usr/local/bin/vllm", line 10, in <module>`, "    sys.exit(main())", `  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/main.py", line 73, in main`, "    args.dispatch_function(args)"} {
			api.Raw(l)
		}
		api.Raw(excType + ": " + msg)
		return 1
	}

	model := res.Positional
	if res.IsSet("model") {
		if model == "" {
			model = res.Get("model")
		}
		api.Warn("argparse_utils.py:191", "With `vllm serve`, you should provide the model as a positional argument or in a config file instead of via the `--model` option. The `--model` option will be removed in v0.13.")
	}
	if model == "" {
		model = defaultModel
	}
	api.Info("api_server.py:1885", "vLLM API server version %s", Version)
	api.Info("utils.py:253", "non-default args: %s", nonDefaultArgs(parser, res, model))
	// EngineArgs.__post_init__: offline, the repository id becomes its
	// snapshot in the cache, or the serve ends here (hfcache.go).
	repo, local := model, ""
	if st, err := os.Stat(model); err == nil && st.IsDir() {
		local = model
	} else if hubOffline(p.Env) {
		snap := snapshotDir(hubCacheDir(p.Env), model, res.Get("revision"))
		if snap == "" {
			return apiFail("huggingface_hub.errors.LocalEntryNotFoundError", errNoSnapshot)
		}
		// vLLM 0.17.1's wheel: vllm/engine/arg_utils.py lines 636-644
		// (get_model_path is vllm/transformers_utils/repo_utils.py:204).
		api.Info("arg_utils.py:640", "HF_HUB_OFFLINE is True, replace model_id [%s] to model_path [%s]", model, snap)
		model, local = snap, snap
	} else {
		local = snapshotDir(hubCacheDir(p.Env), model, res.Get("revision"))
	}

	h, err := hw.Load(p.Env)
	if err != nil && !errors.Is(err, hw.ErrNoDriver) {
		return apiFail("RuntimeError", err.Error())
	}
	if h == nil || len(h.GPUs) == 0 {
		return apiFail("RuntimeError", "Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` to turn on verbose logging to help debug the issue.")
	}
	tm, err := hw.LoadTiming(h, p.Env)
	if err != nil {
		return apiFail("ValueError", err.Error())
	}
	m := h.LookupModel(repo)
	if local != "" {
		// The weights are there: their architecture and sizes are the
		// files', not the table's.
		lm := readLocalModel(local)
		if lm.Architecture != "" {
			m.Architecture = lm.Architecture
		}
		if len(lm.Shards) > 0 {
			m.Shards, m.WeightsGiB = len(lm.Shards), float64(lm.Bytes)/(1<<30)
		}
	}
	api.Info("model.py:637", "Resolved architecture: %s", m.Architecture)
	maxLen := m.MaxModelLen
	if res.IsSet("max_model_len") {
		maxLen = res.Int("max_model_len")
	}
	api.Info("model.py:1728", "Using max model len %d", maxLen)

	tp, pp := 1, 1
	if res.IsSet("tensor_parallel_size") {
		tp = res.Int("tensor_parallel_size")
	}
	if res.IsSet("pipeline_parallel_size") {
		pp = res.Int("pipeline_parallel_size")
	}
	world := tp * pp
	backend := res.Get("distributed_executor_backend")
	if backend == "" {
		switch {
		case world == 1:
			backend = "uni"
		case len(h.GPUs) < world:
			if !rayOnPath(p.Env) {
				return apiFail("ValueError", "Unable to load Ray: No module named 'ray'. Ray is required for multi-node inference, please install Ray with `pip install ray`.")
			}
			backend = "ray"
		default:
			backend = "mp"
		}
		if world > 1 {
			api.Info("parallel.py:556", "Defaulting to use %s for distributed inference", backend)
		}
	}
	util := 0.9
	if res.IsSet("gpu_memory_utilization") {
		util = res.Float("gpu_memory_utilization")
	}
	if util <= 0 || util > 1 {
		return apiFail("pydantic_core._pydantic_core.ValidationError", fmt.Sprintf("1 validation error for CacheConfig\ngpu_memory_utilization\n  Input should be less than or equal to 1 [type=less_than_equal, input_value=%s, input_type=float]", pylog.PyFloat(util)))
	}
	host := res.Get("host")
	port := 8000
	if res.IsSet("port") {
		port = res.Int("port")
	}
	listenAddr := net.JoinHostPort(host, strconv.Itoa(port))
	// vLLM binds its socket before building the engine (and listens after).
	if l, err := net.Listen("tcp", listenAddr); err != nil {
		return apiFail("OSError", "[Errno 98] Address already in use")
	} else {
		l.Close()
	}
	served := res.List("served_model_name")
	if len(served) == 0 {
		served = []string{model}
	}
	enforceEager := res.Bool("enforce_eager")
	api.Info("scheduler.py:222", "Chunked prefill is enabled with max_num_batched_tokens=8192.")
	core.Info("core.py:94", "Initializing a V1 LLM engine (v%s) with config: model='%s', speculative_config=None, tokenizer='%s', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=%s, dtype=torch.bfloat16, max_seq_len=%d, download_dir=None, load_format=auto, tensor_parallel_size=%d, pipeline_parallel_size=%d, data_parallel_size=1, disable_custom_all_reduce=False, quantization=None, enforce_eager=%s, kv_cache_dtype=%s, device_config=cuda, seed=0, served_model_name=%s, enable_prefix_caching=True, enable_chunked_prefill=True",
		Version, model, model, pyBool(res.Bool("trust_remote_code")), maxLen, tp, pp, pyBool(enforceEager), orDefault(res.Get("kv_cache_dtype"), "auto"), served[0])
	if err := sleepCtx(ctx, tm.Get("engine_init")); err != nil {
		return interrupted(ctx, api)
	}
	spec := WorkerSpec{
		Model: model, WeightsMiB: int64(m.WeightsGiB * 1024 / float64(world)), Shards: m.Shards, Utilization: util, EnforceEager: enforceEager,
		KVBytesPerToken: max(m.KVBytesPerToken/int64(tp), 1), MaxModelLen: maxLen, Timing: tm.Map(), VLLMVersion: Version,
	}
	var ex executor
	switch {
	case backend == "ray" && realRayOnPath(p.Env):
		ex = newRealRayExecutor(p, core, tm, spec, world, tp)
	case backend == "ray":
		ex = newRayExecutor(p, core, h, tm, spec, world, tp)
	default:
		ex = newLocalExecutor(p, core, h, spec, world, backend == "mp")
	}
	defer ex.Close()
	start := time.Now()
	kvTokens, err := initEngine(ctx, p, ex, core, spec)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, api)
		}
		var ee *engineError
		lines := []string{err.Error()}
		if errors.As(err, &ee) {
			lines = ee.Lines
		}
		core.Error("core.py:843", "EngineCore failed to start.\n%s", strings.Join(lines, "\n"))
		core.Raw("Process EngineCore_DP0:")
		api.Raw("Traceback (most recent call last):")
		for _, l := range []string{
			`  File "/usr/local/bin/vllm", line 10, in <module>`, "    sys.exit(main())",
			`  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 1962, in run_server_worker`,
			"    async with build_async_engine_client(",
			`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 931, in wait_for_engine_startup`,
			"    raise RuntimeError(",
		} {
			api.Raw(l)
		}
		api.Raw("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return 1
	}
	core.Info("core.py:259", "init engine (profile, create kv cache, warmup model) took %.2f seconds", time.Since(start).Seconds())

	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return apiFail("OSError", "[Errno 98] Address already in use")
	}
	shown := host
	if shown == "" {
		shown = "0.0.0.0"
	}
	url := "http://" + net.JoinHostPort(shown, strconv.Itoa(port))
	api.Info("api_server.py:1634", "Supported_tasks: ['generate']")
	api.Info("api_server.py:1971", "Starting vLLM API server 0 on %s", url)
	api.Info("launcher.py:37", "Available routes are:")
	for _, r := range []string{"/openapi.json, Methods: GET, HEAD", "/docs, Methods: GET, HEAD", "/health, Methods: GET", "/ping, Methods: GET", "/ping, Methods: POST", "/version, Methods: GET", "/v1/models, Methods: GET", "/v1/chat/completions, Methods: POST", "/v1/completions, Methods: POST", "/metrics, Methods: GET"} {
		api.Info("launcher.py:45", "Route: %s", r)
	}
	apiKey := ""
	if k := res.List("api_key"); len(k) > 0 {
		apiKey = k[0]
	} else if k := p.Env.Get("VLLM_API_KEY"); k != "" {
		apiKey = k
	}
	srv := &http.Server{
		Handler: openai.Handler(openai.Config{
			Model: model, Served: served, MaxModelLen: maxLen, TokensPerSecond: tm.TokensPerSecond, APIKey: apiKey, Version: Version,
			Created: p.Now(), Now: p.Now, KVCacheTokens: int(kvTokens),
			AccessLog: func(s string) { api.Raw("INFO:     " + s) },
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	api.Raw(fmt.Sprintf("INFO:     Started server process [%d]", p.Pid))
	api.Raw("INFO:     Waiting for application startup.")
	api.Raw("INFO:     Application startup complete.")
	api.Raw(fmt.Sprintf("INFO:     Uvicorn running on %s (Press CTRL+C to quit)", url))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		api.Raw("INFO:     Shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		api.Raw("INFO:     Waiting for application shutdown.")
		api.Raw("INFO:     Application shutdown complete.")
		api.Raw(fmt.Sprintf("INFO:     Finished server process [%d]", p.Pid))
		return 0
	case err := <-errc:
		return apiFail("OSError", err.Error())
	}
}

// interrupted ends a serve stopped by a signal while it initialises: vLLM's
// run_server turns SIGTERM into KeyboardInterrupt("terminated") until
// uvicorn takes over (vllm-project/vllm#17386, #15997); SIGINT is Python's
// own KeyboardInterrupt.
func interrupted(ctx context.Context, api *plog) int {
	var s signalled
	if !errors.As(context.Cause(ctx), &s) {
		return 1
	}
	api.Raw("Traceback (most recent call last):")
	for _, l := range []string{`  File "/usr/local/bin/vllm", line 10, in <module>`, "    sys.exit(main())",
		`  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/main.py", line 73, in main`, "    args.dispatch_function(args)"} {
		api.Raw(l)
	}
	if s.sig == syscall.SIGTERM {
		api.Raw(`    raise KeyboardInterrupt("terminated")`)
		api.Raw("KeyboardInterrupt: terminated")
		return 1
	}
	api.Raw("KeyboardInterrupt")
	return 1
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// initEngine drives the workers through vLLM's initialization and returns
// the KV cache size in tokens.
func initEngine(ctx context.Context, p *sim.Proc, ex executor, core *plog, spec WorkerSpec) (int64, error) {
	if err := ex.Start(ctx); err != nil {
		return 0, err
	}
	world := ex.WorldSize()
	initMethod := fmt.Sprintf("tcp://%s:%d", ex.DriverIP(), getOpenPort(p.Env))
	// Ray gives every actor its own CUDA_VISIBLE_DEVICES, so local rank 0;
	// local workers share the process and take device = rank.
	_, isLocal := ex.(*localExecutor)
	if _, err := ex.Collective(ctx, "init_worker", func(r int) any {
		lr := 0
		if isLocal {
			lr = r
		}
		return InitArgs{Rank: r, LocalRank: lr, WorldSize: world, InitMethod: initMethod}
	}); err != nil {
		return 0, err
	}
	for _, m := range []string{"init_device", "load_model"} {
		if _, err := ex.Collective(ctx, m, nil); err != nil {
			return 0, err
		}
	}
	mems, err := ex.Collective(ctx, "determine_available_memory", nil)
	if err != nil {
		return 0, err
	}
	var kv int64 = -1
	for _, raw := range mems {
		var mr MemResult
		_ = json.Unmarshal(raw, &mr)
		if kv < 0 || mr.KVBytes < kv {
			kv = mr.KVBytes
		}
	}
	tokens := kv / spec.KVBytesPerToken
	core.Info("kv_cache_utils.py:1229", "GPU KV cache size: %s tokens", commas(tokens))
	core.Info("kv_cache_utils.py:1234", "Maximum concurrency for %s tokens per request: %.2fx", commas(int64(spec.MaxModelLen)), float64(tokens)/float64(spec.MaxModelLen))
	for _, m := range []string{"initialize_cache", "compile_or_warm_up_model"} {
		if _, err := ex.Collective(ctx, m, nil); err != nil {
			return 0, err
		}
	}
	return tokens, nil
}
