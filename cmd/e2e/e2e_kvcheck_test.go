//go:build linux

package e2e

import (
	"strings"
	"testing"
)

// TestE2EKVCacheCheckedAfterStaging is the seeds' "max_model_len beyond the
// KV cache" (issue 32 item 4), which the real vLLM 0.32.0 refuses with
// "To serve at least one request with the model's max seq len (4096) ..."
// (testdata/realvllm/kv-cache-too-small.log): a serve with
// --kv-cache-memory-bytes 1M in extra_args, its model staged by a model
// block in the same apply. apply stages the model, then stops before vllm
// serve starts with the finding, quoting vLLM's message with the length
// that fits; the next plan shows the same error. The lab's tiny model:
// 2 layers over pipeline_parallel_size 2, 2 KV heads of 64, 16-bit: 1 MiB
// holds 128 blocks of 16 tokens, a 4096-token request takes 256.
func TestE2EKVCacheCheckedAfterStaging(t *testing.T) {
	t.Parallel()
	const at = "  ready_timeout          = \"2m\"\n"
	run := stagedModelLab(t, "rfe2ekv", at, at+"  extra_args             = [\"--kv-cache-memory-bytes\", \"1M\"]\n")

	const finding = "max_model_len 4096 does not fit the KV cache: one request takes 256 blocks of 16 tokens, --kv-cache-memory-bytes 1,048,576 holds 128 (one kept free)"
	const vllm = "To serve at least one request with the model's max seq len (4096), (0.0 GiB KV cache is needed, which is larger than the available KV cache memory (0.0 GiB). Based on the available memory, the estimated maximum model length is 2032."
	r := run("apply", "-auto-approve")
	mustCode(t, "apply", r, exitError)
	mustContain(t, "apply", r.stdout+r.stderr, "vllm_serve.s: check the staged model against the serve on spark1",
		"vllm serve s was not started: the staged model does not fit the serve", finding, vllm, "fix: Lower max_model_len to at most 2032")
	if strings.Contains(r.stdout, "vllm_serve.s: start vllm serve") {
		t.Errorf("apply started the serve after the check failed:\n%s", r)
	}
	r = run("plan")
	mustCode(t, "plan after staging", r, exitError)
	mustContain(t, "plan after staging", r.stdout+r.stderr, finding, vllm)
}
