//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"
)

// e2eMainPlusHalf is issue 39 item 7's shape: the lab's main serve
// reduced to tensor_parallel_size 1 (gpu_memory_utilization 0.85, as the
// lab's rayform.hcl) plus a second serve of one GPU asking 0.5, on a lab
// of 2 GPUs a node.
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

// TestE2EMainPlusHalfServe is issue 39 item 7: on a lab of 2 GPUs a node,
// a serve of one GPU at 0.85 and another at 0.5 converge (each on a GPU
// of its own), and the plan after is empty.
func TestE2EMainPlusHalfServe(t *testing.T) {
	l := startLab(t, "rfe2ehalf", append([]string{"-gpus", "2"}, fastRay...)...)
	dir := l.config(fmt.Sprintf(e2eMainPlusHalf, seedImage))
	twoGPUs(t, dir)
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }
	r := run("apply", "-auto-approve")
	if r.code != exitOK {
		for _, name := range []string{"qwen", "half"} {
			lr := run("logs", "vllm_serve."+name)
			t.Logf("logs %s:\n%s", name, tail(lr.stdout+lr.stderr, 60))
		}
	}
	mustCode(t, "apply", r, exitOK)
	mustCode(t, "plan after apply", run("plan", "-detailed-exitcode"), exitOK)
	servesOK(t, run, "half", "qwen")
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
