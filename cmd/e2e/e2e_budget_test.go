//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// e2eBudgetA is the lab's cluster (2 GPUs a node) with one serve of 2
// GPUs (tensor_parallel_size 2).
const e2eBudgetA = e2eSparkCluster + `
vllm_serve "a" {
  cluster                = ray_cluster.spark
  model                  = "Qwen/Qwen3-0.6B"
  served_model_name      = "model-a"
  tensor_parallel_size   = 2
  gpu_memory_utilization = 0.4
  port                   = 8000
  ready_timeout          = "2m"
}
`

// e2eBudgetB is a second serve of 1 GPU.
const e2eBudgetB = `
vllm_serve "b" {
  cluster                = ray_cluster.spark
  model                  = "facebook/opt-125m"
  served_model_name      = "model-b"
  gpu_memory_utilization = 0.4
  port                   = 8001
  ready_timeout          = "2m"
}
`

// TestE2EServeAddedToFullHead is issue 33 item 1 in the lab: a serve of 2
// GPUs runs on two nodes of 2 GPUs; Ray packed its placement group onto
// the head (vLLM pins the first bundle there, PACK fills the head). Adding
// a serve of 1 GPU planned "1 to add", and apply failed with vLLM's
// "Current node has no GPU available". Now plan refuses it, naming the
// head and its GPUs as Ray reports them, and apply changes nothing (the
// running serve keeps serving). The fix plan gives, -replace of the
// running serve, starts both in one apply, the small one first, and both
// converge; created together on a new cluster, the same: the result does
// not depend on the order they were added in.
func TestE2EServeAddedToFullHead(t *testing.T) {
	// The real Ray 2.53 (its subject is Ray's placement and what Ray
	// reports free), with the vLLM stand-in's Ray executor, vLLM 0.17.1's
	// on Ray's own API: the GPU check on the driver's node, the PACK
	// placement group with node:<driver ip>. (RAYFORM_E2E_RAY=simnode
	// runs it on simnode's Ray, which reports the same.)
	l := startLab(t, "rfe2ebudget", "-gpus", "2")
	dir := l.config(fmt.Sprintf(e2eBudgetA, seedImage))
	twoGPUs(t, dir)
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }
	mustCode(t, "apply a", run("apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after apply", run("plan", "-detailed-exitcode"), exitOK)

	main := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(main, []byte(mustRead(t, main)+e2eBudgetB), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run("plan")
	mustCode(t, "plan with b added", r, exitError)
	out := r.stdout + r.stderr
	mustContain(t, "plan with b added", out,
		"vllm_serve.b cannot start: its engine needs a free GPU on the head spark1, and Ray has 0 of its 2 GPUs free",
		"GPUs free as Ray reports them (ray status): spark1 0 of 2, spark2 2 of 2.",
		"vllm_serve.a (2)", "Current node has no GPU available",
		"apply with -replace=vllm_serve.a: rayform then restarts it and starts the serves smallest first (vllm_serve.b, vllm_serve.a), so all fit")
	mustCode(t, "apply with b added", run("apply", "-auto-approve"), exitError)
	servesOK(t, run, "model-a")

	// The fix the plan gives: both start in one apply, b first.
	bFirst := func(what string, r result) {
		t.Helper()
		mustCode(t, what, r, exitOK)
		done := func(addr string) int {
			loc := regexp.MustCompile(regexp.QuoteMeta(addr) + `: \S+ complete after`).FindStringIndex(r.stdout)
			if loc == nil {
				t.Fatalf("%s: no completion of %s:\n%s", what, addr, r.stdout)
			}
			return loc[0]
		}
		if done("vllm_serve.a") < done("vllm_serve.b") {
			t.Errorf("%s: vllm_serve.a completed before vllm_serve.b, which must start first:\n%s", what, r.stdout)
		}
		mustCode(t, "plan after "+what, run("plan", "-detailed-exitcode"), exitOK)
		servesOK(t, run, "model-a", "model-b")
	}
	bFirst("apply -replace=vllm_serve.a", run("apply", "-auto-approve", "-replace=vllm_serve.a"))

	// Created together on a new cluster: the same order, both converge.
	mustCode(t, "destroy", run("destroy", "-auto-approve"), exitOK)
	bFirst("apply of both", run("apply", "-auto-approve"))
}

// servesOK checks that status -json shows the serves, in order, each ok
// and serving its model.
func servesOK(t *testing.T, run func(args ...string) result, models ...string) {
	t.Helper()
	r := run("status", "-json")
	var rep statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status -json: %v\n%s", err, r.stdout)
	}
	if len(rep.Serves) < len(models) {
		t.Fatalf("status shows %d serves, want %d:\n%s", len(rep.Serves), len(models), r.stdout)
	}
	for i, want := range models {
		if s := rep.Serves[i]; s.Health != "ok" || len(s.Models) != 1 || s.Models[0] != want {
			t.Errorf("%s: %s (%s), models %v; want ok serving %s", s.Address, s.Health, s.HealthDetail, s.Models, want)
		}
	}
}
