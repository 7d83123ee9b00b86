// Package vllm plays `vllm serve`: vLLM's argument parsing, its startup log,
// the engine's workers (in-process for the uni and mp backends, Ray actors
// on every node for the ray backend: placement group anchored on
// node:<driver ip>, c10d rendezvous on the driver's address, NCCL/Gloo
// interface checks, weight loading, KV cache sizing, CUDA graph capture
// under Ray's memory monitor), and, once loaded, the OpenAI server.
package vllm

import (
	"context"
	"fmt"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rayform/rayform/cmd/simnode/internal/argparse"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// Version is the vLLM version the simulator reports.
const Version = "0.17.1"

const (
	topUsage   = "vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."
	serveUsage = "vllm serve [model_tag] [options]"
)

var subcommands = []string{"chat", "complete", "serve", "bench", "collect-env", "run-batch"}

func o(kind argparse.Kind, typ argparse.Type, names ...string) argparse.Option {
	return argparse.Option{Names: names, Kind: kind, Type: typ}
}

func choice(choices []string, names ...string) argparse.Option {
	return argparse.Option{Names: names, Kind: argparse.One, Choices: choices}
}

// serveOptions are the `vllm serve` options simnode accepts (vLLM 0.17's
// frontend, model, cache, parallel, scheduler and load arguments).
func serveOptions() []argparse.Option {
	S, I, F, H := argparse.Str, argparse.Int, argparse.Float, argparse.HumanInt
	one, many, flag, bopt, opt := argparse.One, argparse.Many, argparse.StoreTrue, argparse.BoolOpt, argparse.Optional
	return []argparse.Option{
		// frontend
		o(one, S, "--host"), o(one, I, "--port"), o(one, S, "--uds"), o(one, S, "--uvicorn-log-level"), o(bopt, S, "--disable-uvicorn-access-log"),
		o(many, S, "--allowed-origins"), o(bopt, S, "--allow-credentials"), o(many, S, "--allowed-methods"), o(many, S, "--allowed-headers"),
		o(many, S, "--api-key"), o(one, S, "--lora-modules"), o(one, S, "--chat-template"), o(one, S, "--chat-template-content-format"),
		o(one, S, "--response-role"), o(one, S, "--ssl-keyfile"), o(one, S, "--ssl-certfile"), o(one, S, "--ssl-ca-certs"), o(one, S, "--root-path"),
		o(many, S, "--middleware"), o(bopt, S, "--enable-auto-tool-choice"), o(one, S, "--tool-call-parser"), o(one, S, "--tool-parser-plugin"),
		o(bopt, S, "--enable-log-requests"), o(bopt, S, "--disable-log-requests"), o(bopt, S, "--disable-log-stats"), o(one, I, "--max-log-len"),
		o(bopt, S, "--disable-fastapi-docs"), o(bopt, S, "--enable-prompt-tokens-details"), o(bopt, S, "--enable-server-load-tracking"),
		o(bopt, S, "--enable-force-include-usage"), o(bopt, S, "--enable-request-id-headers"), o(one, I, "--api-server-count"), o(one, S, "--config"),
		o(bopt, S, "--headless"), o(bopt, S, "--enable-sleep-mode"), o(one, S, "--log-config-file"), o(bopt, S, "--enable-tokenizer-info-endpoint"),
		// model
		o(one, S, "--model"), o(one, S, "--runner"), o(one, S, "--convert"), o(one, S, "--task"), o(one, S, "--tokenizer"),
		choice([]string{"auto", "custom", "mistral", "slow"}, "--tokenizer-mode"), o(bopt, S, "--trust-remote-code"),
		choice([]string{"auto", "bfloat16", "float", "float16", "float32", "half"}, "--dtype"), o(one, I, "--seed"), o(one, S, "--hf-config-path"),
		o(one, S, "--allowed-local-media-path"), o(one, S, "--revision"), o(one, S, "--code-revision"), o(one, S, "--rope-scaling"), o(one, F, "--rope-theta"),
		o(one, S, "--tokenizer-revision"), o(one, H, "--max-model-len"), o(one, S, "--quantization", "-q"), o(bopt, S, "--enforce-eager"),
		o(one, I, "--max-seq-len-to-capture"), o(one, I, "--max-logprobs"), o(one, S, "--logprobs-mode"), o(bopt, S, "--disable-sliding-window"),
		o(bopt, S, "--disable-cascade-attn"), o(bopt, S, "--skip-tokenizer-init"), o(bopt, S, "--enable-prompt-embeds"), o(many, S, "--served-model-name"),
		o(one, S, "--config-format"), o(one, S, "--hf-token"), o(one, S, "--hf-overrides"), o(one, S, "--pooler-config"),
		o(one, S, "--override-pooler-config"), o(one, S, "--generation-config"), o(one, S, "--override-generation-config"),
		o(one, S, "--model-impl"), o(one, S, "--override-attention-dtype"), o(one, S, "--logits-processors"),
		o(one, S, "--io-processor-plugin"), o(one, S, "--reasoning-parser"), o(one, S, "--guided-decoding-backend"), o(one, S, "--structured-outputs-config"),
		// load
		choice([]string{"auto", "pt", "safetensors", "npcache", "dummy", "tensorizer", "runai_streamer", "runai_streamer_sharded", "bitsandbytes", "sharded_state", "gguf", "mistral", "fastsafetensors"}, "--load-format"),
		o(one, S, "--download-dir"), o(one, S, "--safetensors-load-strategy"), o(one, S, "--model-loader-extra-config"), o(many, S, "--ignore-patterns"),
		o(bopt, S, "--use-tqdm-on-load"), o(one, S, "--pt-load-map-location"),
		// parallel
		choice([]string{"external_launcher", "mp", "ray", "uni"}, "--distributed-executor-backend"),
		o(one, I, "--pipeline-parallel-size", "-pp"), o(one, I, "--tensor-parallel-size", "-tp"), o(one, I, "--decode-context-parallel-size", "-dcp"),
		o(one, I, "--data-parallel-size", "-dp"), o(one, I, "--data-parallel-rank", "-dpn"), o(one, I, "--data-parallel-start-rank", "-dpr"),
		o(one, I, "--data-parallel-size-local", "-dpl"), o(one, S, "--data-parallel-address", "-dpa"), o(one, I, "--data-parallel-rpc-port", "-dpp"),
		o(one, S, "--data-parallel-backend", "-dpb"), o(bopt, S, "--data-parallel-hybrid-lb"), o(bopt, S, "--enable-expert-parallel"),
		o(bopt, S, "--enable-eplb"), o(one, S, "--eplb-config"), o(one, I, "--max-parallel-loading-workers"), o(bopt, S, "--ray-workers-use-nsight"),
		o(bopt, S, "--disable-custom-all-reduce"), o(one, S, "--worker-cls"), o(one, S, "--worker-extension-cls"), o(one, I, "--nnodes"),
		o(one, I, "--node-rank"), o(one, S, "--master-addr"), o(one, I, "--master-port"), o(one, S, "--all2all-backend"),
		// cache
		o(one, I, "--block-size"), o(one, F, "--gpu-memory-utilization"), o(one, H, "--kv-cache-memory"), o(one, F, "--swap-space"),
		choice([]string{"auto", "bfloat16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc"}, "--kv-cache-dtype"), o(one, I, "--num-gpu-blocks-override"),
		o(bopt, S, "--enable-prefix-caching"), o(one, S, "--prefix-caching-hash-algo"), o(one, F, "--cpu-offload-gb"), o(bopt, S, "--calculate-kv-scales"),
		o(one, S, "--mamba-cache-dtype"), o(bopt, S, "--kv-sharing-fast-prefill"),
		// multimodal / lora / scheduler / compilation / misc
		o(one, S, "--limit-mm-per-prompt"), o(one, S, "--mm-processor-kwargs"), o(one, F, "--mm-processor-cache-gb"), o(one, S, "--mm-encoder-tp-mode"),
		o(bopt, S, "--enable-lora"), o(one, I, "--max-loras"), o(one, I, "--max-lora-rank"), o(one, I, "--max-cpu-loras"),
		o(one, H, "--max-num-batched-tokens"), o(one, I, "--max-num-seqs"), o(one, I, "--max-num-partial-prefills"), choice([]string{"fcfs", "priority"}, "--scheduling-policy"),
		o(bopt, S, "--enable-chunked-prefill"), o(bopt, S, "--async-scheduling"), o(one, S, "--scheduler-cls"), o(one, I, "--long-prefill-token-threshold"),
		o(one, S, "--compilation-config", "-O"), o(one, S, "--speculative-config"), o(one, S, "--kv-transfer-config"), o(one, S, "--kv-events-config"),
		o(one, S, "--additional-config"), o(one, S, "--otlp-traces-endpoint"), o(one, S, "--collect-detailed-traces"), o(opt, S, "--enable-log-outputs"),
		o(one, S, "--cuda-graph-sizes"), o(bopt, S, "--fully-sharded-loras"), o(one, F, "--disable-log-stats-interval"),
		o(bopt, S, "--disable-hybrid-kv-cache-manager"), o(flag, S, "--enable-return-routed-experts"),
	}
}

func serveParser() *argparse.Parser {
	return &argparse.Parser{Prog: "vllm serve", Usage: serveUsage, TopProg: "vllm", TopUsage: topUsage, Options: serveOptions(), Positional: "model_tag"}
}

// Main runs `vllm ARGS...`.
func Main(ctx context.Context, p *sim.Proc) int {
	args := p.Args
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(p.Stdout, "usage: %s\n\nvLLM CLI\n\npositional arguments:\n  {chat,complete,serve,bench,collect-env,run-batch}\n    serve               Launch a local OpenAI-compatible API server to serve LLM\n                        completions via HTTP.\n\noptions:\n  -h, --help            show this help message and exit\n  -v, --version         show program's version number and exit\n", topUsage)
		return 0
	}
	if args[0] == "-v" || args[0] == "--version" {
		fmt.Fprintln(p.Stdout, Version)
		return 0
	}
	known := false
	for _, s := range subcommands {
		if s == args[0] {
			known = true
		}
	}
	if !known {
		q := make([]string, len(subcommands))
		for i, s := range subcommands {
			q[i] = "'" + s + "'"
		}
		fmt.Fprintf(p.Stderr, "usage: %s\nvllm: error: argument subparser: invalid choice: '%s' (choose from %s)\n", topUsage, args[0], strings.Join(q, ", "))
		return 2
	}
	if args[0] != "serve" {
		fmt.Fprintf(p.Stderr, "simnode: `vllm %s` is not simulated\n", args[0])
		return 1
	}
	parser := serveParser()
	res, perr := parser.Parse(args[1:])
	if perr != nil {
		fmt.Fprint(p.Stderr, perr.Format())
		return 2
	}
	if res.Help {
		fmt.Fprintf(p.Stdout, "usage: %s\n\nStart the vLLM OpenAI Compatible API server.\n", serveUsage)
		return 0
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serve(ctx, p, parser, res)
}
