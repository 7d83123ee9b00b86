package vllmcli

// ServeOptions are the options of `vllm serve` in registration order:
// make_arg_parser's own (cli_args.py), FrontendArgs (cli_args.py), then
// EngineArgs and AsyncEngineArgs (arg_utils.py), less what was removed
// before the targeted version. testdata/simnode/vllm/serve-flags.txt cites
// the source of every entry.
func ServeOptions() Set {
	S, I, F, H, J := Str, Int, Float, HumanInt, JSON
	one := func(t Type, names ...string) Option { return Option{Names: names, Action: Store, Type: t} }
	many := func(t Type, names ...string) Option { return Option{Names: names, Action: Many, Type: t} }
	boolopt := func(names ...string) Option { return Option{Names: names, Action: BoolOpt} }
	flag := func(names ...string) Option { return Option{Names: names, Action: StoreTrue} }
	choice := func(choices []string, names ...string) Option {
		return Option{Names: names, Action: Store, Type: Str, Choices: choices}
	}
	return Set{
		// make_arg_parser
		flag("--headless"), one(I, "--api-server-count", "-asc"), one(S, "--config"),
		// FrontendArgs
		one(S, "--host"), one(I, "--port"), one(S, "--uds"),
		choice([]string{"critical", "debug", "error", "info", "trace", "warning"}, "--uvicorn-log-level"),
		boolopt("--disable-uvicorn-access-log"), boolopt("--allow-credentials"),
		one(J, "--allowed-origins"), one(J, "--allowed-methods"), one(J, "--allowed-headers"),
		many(S, "--api-key"), many(S, "--lora-modules"), one(S, "--chat-template"),
		choice([]string{"auto", "openai", "string"}, "--chat-template-content-format"),
		boolopt("--trust-request-chat-template"), one(S, "--response-role"),
		one(S, "--ssl-keyfile"), one(S, "--ssl-certfile"), one(S, "--ssl-ca-certs"), boolopt("--enable-ssl-refresh"), one(I, "--ssl-cert-reqs"),
		one(S, "--root-path"), {Names: []string{"--middleware"}, Action: Append, Type: S},
		boolopt("--return-tokens-as-token-ids"), boolopt("--disable-frontend-multiprocessing"), boolopt("--enable-request-id-headers"),
		boolopt("--enable-auto-tool-choice"), boolopt("--exclude-tools-when-tool-choice-none"),
		one(S, "--tool-call-parser"), one(S, "--tool-parser-plugin"), one(S, "--tool-server"), one(S, "--log-config-file"),
		one(I, "--max-log-len"), boolopt("--disable-fastapi-docs"), boolopt("--enable-prompt-tokens-details"),
		boolopt("--enable-server-load-tracking"), boolopt("--enable-force-include-usage"), boolopt("--enable-tokenizer-info-endpoint"),
		boolopt("--enable-log-outputs"), one(I, "--h11-max-incomplete-event-size"), one(I, "--h11-max-header-count"),
		boolopt("--log-error-stack"), boolopt("--tokens-only"),
		// EngineArgs: ModelConfig
		one(S, "--model"), one(S, "--runner"), one(S, "--convert"), one(S, "--tokenizer"), one(S, "--tokenizer-mode"),
		boolopt("--trust-remote-code"), choice([]string{"auto", "bfloat16", "float", "float16", "float32", "half"}, "--dtype"),
		one(I, "--seed"), one(S, "--hf-config-path"), one(S, "--allowed-local-media-path"), many(S, "--allowed-media-domains"),
		one(S, "--revision"), one(S, "--code-revision"), one(J, "--rope-scaling"), one(F, "--rope-theta"), one(S, "--tokenizer-revision"),
		one(H, "--max-model-len"), one(S, "--quantization", "-q"), boolopt("--enforce-eager"), one(I, "--max-logprobs"),
		one(S, "--logprobs-mode"), boolopt("--disable-sliding-window"), boolopt("--disable-cascade-attn"),
		boolopt("--skip-tokenizer-init"), boolopt("--enable-prompt-embeds"), many(S, "--served-model-name"), one(S, "--config-format"),
		{Names: []string{"--hf-token"}, Action: MaybeOne, Type: S}, one(J, "--hf-overrides"), one(J, "--pooler-config"),
		one(S, "--logits-processor-pattern"), one(S, "--generation-config"), one(J, "--override-generation-config"),
		boolopt("--enable-sleep-mode"), one(S, "--model-impl"), one(S, "--override-attention-dtype"),
		many(S, "--logits-processors"), one(S, "--io-processor-plugin"),
		// LoadConfig
		one(S, "--load-format"), one(S, "--download-dir"), one(S, "--safetensors-load-strategy"),
		one(J, "--model-loader-extra-config"), many(S, "--ignore-patterns"), boolopt("--use-tqdm-on-load"), one(S, "--pt-load-map-location"),
		// StructuredOutputsConfig
		one(S, "--reasoning-parser"),
		// ParallelConfig
		choice([]string{"external_launcher", "mp", "ray", "uni"}, "--distributed-executor-backend"),
		one(I, "--pipeline-parallel-size", "-pp"), one(I, "--tensor-parallel-size", "-tp"), one(I, "--decode-context-parallel-size", "-dcp"),
		one(I, "--data-parallel-size", "-dp"), one(I, "--data-parallel-rank", "-dpn"), one(I, "--data-parallel-start-rank", "-dpr"),
		one(I, "--data-parallel-size-local", "-dpl"), one(S, "--data-parallel-address", "-dpa"), one(I, "--data-parallel-rpc-port", "-dpp"),
		one(S, "--data-parallel-backend", "-dpb"), boolopt("--data-parallel-hybrid-lb"), boolopt("--enable-expert-parallel"),
		one(S, "--all2all-backend"), boolopt("--enable-dbo"), one(I, "--dbo-decode-token-threshold"), one(I, "--dbo-prefill-token-threshold"),
		boolopt("--disable-nccl-for-dp-synchronization"), boolopt("--enable-eplb"), one(J, "--eplb-config"), one(S, "--expert-placement-strategy"),
		one(I, "--max-parallel-loading-workers"), boolopt("--ray-workers-use-nsight"), boolopt("--disable-custom-all-reduce"),
		one(S, "--worker-cls"), one(S, "--worker-extension-cls"),
		// CacheConfig
		one(I, "--block-size"), one(F, "--gpu-memory-utilization"), one(H, "--kv-cache-memory-bytes"), one(F, "--swap-space"),
		choice([]string{"auto", "bfloat16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc"}, "--kv-cache-dtype"),
		one(I, "--num-gpu-blocks-override"), boolopt("--enable-prefix-caching"), one(S, "--prefix-caching-hash-algo"),
		one(F, "--cpu-offload-gb"), boolopt("--calculate-kv-scales"), boolopt("--kv-sharing-fast-prefill"),
		one(S, "--mamba-cache-dtype"), one(S, "--mamba-ssm-cache-dtype"), one(I, "--mamba-block-size"),
		// MultiModalConfig
		one(J, "--limit-mm-per-prompt"), boolopt("--enable-mm-embeds"), one(J, "--media-io-kwargs"), one(J, "--mm-processor-kwargs"),
		one(F, "--mm-processor-cache-gb"), one(S, "--mm-processor-cache-type"), one(I, "--mm-shm-cache-max-object-size-mb"),
		one(S, "--mm-encoder-tp-mode"), one(S, "--mm-encoder-attn-backend"), boolopt("--interleave-mm-strings"),
		boolopt("--skip-mm-profiling"), one(F, "--video-pruning-rate"),
		// LoRAConfig
		boolopt("--enable-lora"), one(I, "--max-loras"), one(I, "--max-lora-rank"), one(I, "--lora-extra-vocab-size"),
		one(S, "--lora-dtype"), one(I, "--max-cpu-loras"), boolopt("--fully-sharded-loras"), one(J, "--default-mm-loras"),
		// ObservabilityConfig
		one(S, "--show-hidden-metrics-for-version"), one(S, "--otlp-traces-endpoint"), many(S, "--collect-detailed-traces"),
		// SchedulerConfig
		one(H, "--max-num-batched-tokens"), one(I, "--max-num-seqs"), one(I, "--max-num-partial-prefills"),
		one(I, "--max-long-partial-prefills"), one(I, "--long-prefill-token-threshold"), one(I, "--num-lookahead-slots"),
		choice([]string{"fcfs", "priority"}, "--scheduling-policy"), boolopt("--enable-chunked-prefill"),
		boolopt("--disable-chunked-mm-input"), one(S, "--scheduler-cls"), boolopt("--disable-hybrid-kv-cache-manager"),
		boolopt("--async-scheduling"),
		// CompilationConfig
		many(I, "--cudagraph-capture-sizes"), one(I, "--max-cudagraph-capture-size"),
		// VllmConfig
		one(J, "--speculative-config"), one(J, "--kv-transfer-config"), one(J, "--kv-events-config"),
		one(J, "--compilation-config", "-O"), one(J, "--additional-config"), one(J, "--structured-outputs-config"),
		one(S, "--optimization-level"),
		// EngineArgs' own, then AsyncEngineArgs
		flag("--disable-log-stats"), flag("--aggregate-engine-logging"), boolopt("--enable-log-requests"),
	}
}
