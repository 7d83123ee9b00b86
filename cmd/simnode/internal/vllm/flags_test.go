package vllm

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/resources/clitables"
)

// addr is a Python object address in an error text ("<function loads at
// 0x7f...>"): it differs from run to run, in real vLLM too.
var addr = regexp.MustCompile(`0x[0-9a-f]+`)

// The stand-in answers every probe command line as the image's real vLLM
// did when scripts/gen-flag-tables ran it through vLLM's own entry point:
// the same exit status and, for a refusal, the same stderr word for word
// (argparse's usage line and error, exit 2). Accepted command lines parse.
func TestStandInMatchesRealVLLM(t *testing.T) {
	table := clitables.MustVLLM(Version)
	checked := 0
	for _, pr := range table.Probes {
		code, plain := pr.ExitCode()
		name := strings.Join(pr.Args, " ")
		if !plain {
			// vLLM's own checks raised (FlexibleArgumentParser's ValueError,
			// validate_parsed_serve_args' TypeError): a traceback, exit 1,
			// ending with the exception line the probe recorded.
			var out, errb bytes.Buffer
			p := &sim.Proc{Args: pr.Args, Env: sim.Env{}, Stdout: &out, Stderr: &errb, Now: time.Now}
			if got := Main(context.Background(), p); got != 1 || !strings.HasSuffix(errb.String(), pr.Stderr) || !strings.HasPrefix(errb.String(), "Traceback (most recent call last):") {
				t.Errorf("vllm %s (%s): exit %d, stderr\n%s\nreal vLLM %s: a traceback ending with\n%s", name, pr.Note, got, errb.String(), Version, pr.Stderr)
			}
			checked++
			continue
		}
		switch code {
		case 0:
			if pr.Args[0] != "serve" {
				continue
			}
			if _, err := serveParser().Parse(pr.Args[1:]); err != nil {
				t.Errorf("vllm %s (%s): the stand-in refuses it:\n%s\nreal vLLM %s accepts it", name, pr.Note, err.Format(), Version)
			}
			checked++
		case 2:
			var out, errb bytes.Buffer
			p := &sim.Proc{Args: pr.Args, Env: sim.Env{}, Stdout: &out, Stderr: &errb, Now: time.Now}
			got := Main(context.Background(), p)
			if got != 2 || addr.ReplaceAllString(errb.String(), "0x") != addr.ReplaceAllString(pr.Stderr, "0x") {
				t.Errorf("vllm %s (%s): exit %d, stderr\n%s\nreal vLLM %s: exit 2, stderr\n%s", name, pr.Note, got, errb.String(), Version, pr.Stderr)
			}
			checked++
		default:
			t.Errorf("vllm %s: unexpected recorded exit %d", name, code)
		}
	}
	if checked < 300 {
		t.Errorf("only %d probes checked; the table has %d", checked, len(table.Probes))
	}
}

// probeResult is what real vLLM did with `vllm serve M args...` when the
// table was generated (exit status, stderr), if the table recorded it.
func probeResult(t *testing.T, args ...string) (int, string, bool) {
	t.Helper()
	want := strings.Join(append([]string{"serve", "Qwen/Qwen3-0.6B"}, args...), "\x00")
	for _, pr := range clitables.MustVLLM(Version).Probes {
		if strings.Join(pr.Args, "\x00") == want {
			code, _ := pr.ExitCode()
			return code, pr.Stderr, true
		}
	}
	return 0, "", false
}

// Issue 21 listed what the transcribed 0.17.1 table got wrong; each class
// is now right in the stand-in, and each case is one real vLLM 0.17.1 was
// asked about (a probe of the generated table).
func TestIssue21TranscribedTableErrors(t *testing.T) {
	// The 49 real options the transcribed table rejected (and the short
	// aliases it lacked on options it had).
	rejectedReal := [][]string{
		{"--default-chat-template-kwargs", "{}"}, {"--enable-log-deltas"}, {"--disable-access-log-for-endpoints", "x"}, {"--ssl-ciphers", "x"},
		{"--enable-offline-docs"}, {"--use-gpu-for-pooling-score"}, {"--allow-deprecated-quantization"}, {"--enable-return-routed-experts"},
		{"--attention-backend", "x"}, {"--reasoning-parser-plugin", "x"}, {"--master-addr", "x"}, {"--master-port", "1"}, {"--nnodes", "1"}, {"-n", "1"},
		{"--node-rank", "1"}, {"-r", "1"}, {"--dcp-kv-cache-interleave-size", "1"}, {"--cp-kv-cache-interleave-size", "1"},
		{"--prefill-context-parallel-size", "1"}, {"-pcp", "1"}, {"--data-parallel-external-lb"}, {"-dpe"}, {"--ubatch-size", "1"},
		{"--enable-elastic-ep"}, {"--mamba-cache-mode", "align"}, {"--kv-offloading-size", "0.5"}, {"--kv-offloading-backend", "lmcache"},
		{"--offload-backend", "auto"}, {"--cpu-offload-params", "x"}, {"--offload-group-size", "1"}, {"--offload-num-in-group", "1"},
		{"--offload-prefetch-step", "1"}, {"--offload-params", "x"}, {"--language-model-only"}, {"--mm-encoder-only"},
		{"--enable-tower-connector-lora"}, {"--specialize-active-lora"}, {"--kv-cache-metrics"}, {"--kv-cache-metrics-sample", "0.5"},
		{"--cudagraph-metrics"}, {"--enable-layerwise-nvtx-tracing"}, {"--enable-mfu-metrics"}, {"--enable-logging-iteration-details"},
		{"--stream-interval", "1"}, {"--enable-flashinfer-autotune"}, {"--moe-backend", "aiter"}, {"--ec-transfer-config", "{}"},
		{"--attention-config", "{}"}, {"-ac", "{}"}, {"--kernel-config", "{}"}, {"--profiler-config", "{}"}, {"--performance-mode", "balanced"},
		{"--weight-transfer-config", "{}"}, {"--fail-on-environ-validation"}, {"-dph"}, {"-ep"}, {"-cc", "{}"},
	}
	for _, args := range rejectedReal {
		code, stderr, ok := probeResult(t, args...)
		if !ok || code != 0 {
			t.Errorf("vllm serve M %s: the table's probe says exit %d (recorded %v) %s; want a real option", strings.Join(args, " "), code, ok, stderr)
			continue
		}
		if _, err := serveParser().Parse(append([]string{"M"}, args...)); err != nil {
			t.Errorf("vllm serve M %s: the stand-in refuses a real option: %s", strings.Join(args, " "), err.Format())
		}
	}
	// The 6 it accepted that real vLLM 0.17.1 rejects.
	for _, args := range [][]string{{"--rope-scaling", "{}"}, {"--rope-theta", "1000000"}, {"--num-lookahead-slots", "1"},
		{"--lora-extra-vocab-size", "256"}, {"--logits-processor-pattern", "x"}, {"-O", "{}"}} {
		code, stderr, ok := probeResult(t, args...)
		if !ok || code != 2 {
			t.Fatalf("vllm serve M %s: no recorded refusal (exit %d)", strings.Join(args, " "), code)
		}
		_, err := serveParser().Parse(append([]string{"M"}, args...))
		if err == nil || err.Format() != stderr {
			t.Errorf("vllm serve M %s: stand-in %v; real vLLM:\n%s", strings.Join(args, " "), err, stderr)
		}
	}
	// The 14 it let take free values where real vLLM restricts choices.
	for _, opt := range []string{"--runner", "--convert", "--logprobs-mode", "--all2all-backend", "--expert-placement-strategy", "--block-size",
		"--prefix-caching-hash-algo", "--mamba-cache-dtype", "--mamba-ssm-cache-dtype", "--mm-processor-cache-type", "--mm-encoder-tp-mode",
		"--max-lora-rank", "--lora-dtype", "--collect-detailed-traces"} {
		o := serveParser().Options.Lookup(opt)
		if o == nil || len(o.Choices) == 0 {
			t.Errorf("%s: want restricted choices, got %+v", opt, o)
			continue
		}
		_, err := serveParser().Parse([]string{"M", opt, "3"})
		if err == nil || !strings.Contains(err.Msg, "invalid choice: ") {
			t.Errorf("vllm serve M %s 3: stand-in %v; want argparse's invalid choice", opt, err)
		}
	}
}

// FlexibleArgumentParser moves --model to the positional before it checks
// for --served-model-name without a model, so this command line parses.
func TestServedNameWithModelOption(t *testing.T) {
	if tb := preParseError([]string{"serve", "--served-model-name", "x", "--model", "M"}); tb != "" {
		t.Errorf("refused:\n%s", tb)
	}
	if tb := preParseError([]string{"serve", "--served_model_name=x"}); !strings.HasSuffix(tb, "`vllm serve <model> --<arg> <value>`.\n") {
		t.Errorf("not refused: %q", tb)
	}
}
