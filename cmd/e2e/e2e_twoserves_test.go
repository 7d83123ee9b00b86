//go:build linux

package e2e

import (
	"fmt"
	"testing"
)

// e2eMainPlusHalf is issue 39 item 7's shape: the lab's main serve
// reduced to tensor_parallel_size 1 (gpu_memory_utilization 0.85, as the
// lab's rayform.hcl) plus a second serve of one GPU asking 0.5, on a lab
// of 2 GPUs a node (GB10s: unified memory).
const e2eMainPlusHalf = e2eSparkCluster + `
vllm_serve "qwen" {
  cluster                = ray_cluster.spark
  model                  = "Qwen/Qwen3-0.6B"
  served_model_name      = "qwen"
  gpu_memory_utilization = 0.85
  port                   = 8000
  ready_timeout          = "2m"
}

vllm_serve "half" {
  cluster                = ray_cluster.spark
  model                  = "facebook/opt-125m"
  served_model_name      = "half"
  gpu_memory_utilization = 0.5
  port                   = 8001
  ready_timeout          = "2m"
}
`

// TestE2EUnifiedMemoryShared is issue 39 item 7. Its cause: vLLM's Ray
// executor (the stand-in plays 0.17.1's, which pins each serve's first
// bundle on the head) puts both serves on the head, on GPUs of their own
// (Ray's CUDA_VISIBLE_DEVICES), but the lab's GB10s share the node's
// unified memory; since apply starts serves one after another (the GPU
// budget's order) the second sees the first's 0.85 taken and fails at
// its start ("Free memory on device cuda:0 (11.9/119.7 GiB)"). At
// 358f68e they started at the same moment and both passed vLLM's check,
// sharing memory neither had alone. Now plan refuses the pair naming the
// node and its unified memory, and apply changes nothing; with the
// second serve at 0.05 both converge and plan is empty after.
//
// Fast mode (simnode's Ray and vLLM): simnode's vLLM applies vLLM's start
// check to a unified node's system memory (hw.Unified), and the subject
// is the plan's judgment and the start order, not Ray.
func TestE2EUnifiedMemoryShared(t *testing.T) {
	l := startLab(t, "rfe2ehalf", append([]string{"-gpus", "2"}, fastRay...)...)
	dir := l.config(fmt.Sprintf(e2eMainPlusHalf, seedImage))
	twoGPUs(t, dir)
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }

	r := run("plan")
	mustCode(t, "plan of 0.85 + 0.5", r, exitError)
	mustContain(t, "plan of 0.85 + 0.5", r.stdout+r.stderr,
		"vllm_serve.half and vllm_serve.qwen run on GPUs of spark1, whose memory is unified, and ask 1.35 of it together",
		"Free memory on device cuda:0")
	mustCode(t, "apply of 0.85 + 0.5", run("apply", "-auto-approve"), exitError)

	setConfig(t, dir, "gpu_memory_utilization = 0.5", "gpu_memory_utilization = 0.05")
	mustCode(t, "apply of 0.85 + 0.05", run("apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after apply", run("plan", "-detailed-exitcode"), exitOK)
	servesOK(t, run, "half", "qwen")
}
