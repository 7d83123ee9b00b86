//go:build linux

package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// TestE2ERealVLLM: the real vLLM (lab up -vllm real: vLLM 0.32.0's CPU
// build on the real Ray 2.53.0) serving the lab hub's tiny Llama with
// tensor_parallel_size = 2 across the two nodes, from the lab's own
// rayform.hcl. plan shows the worker's copy of the model absent; apply
// stages it from the head over the fabric, starts Ray and `vllm serve`
// (vLLM's own entry point, its Ray executor placing one rank per node,
// Gloo between the fabric addresses: the lab's platform plugin keeps
// vLLM's shared-memory all-reduce off the tp group, whose ranks are on two
// hosts), and a text completion answers at the endpoint output; the head's
// container imports vLLM 0.32.0 and the worker's runs vLLM's Ray worker
// actor; status shows the real server's health, model and /metrics
// (requests running and waiting, tokens, KV cache usage); the next plan is
// empty; destroy leaves no container on either node.
//
// Its lab takes the whole lab pool (labpool_test.go: wholeLab). Its first
// run on a machine fetches the vLLM layer's wheels (about 2.8 GB from
// PyPI) into the lab cache and builds the layer; README's lab section
// gives the times. RAYFORM_E2E_REAL_VLLM=0 skips it (a quicker local run).
func TestE2ERealVLLM(t *testing.T) {
	if os.Getenv("RAYFORM_E2E_REAL_VLLM") == "0" {
		t.Skip("RAYFORM_E2E_REAL_VLLM=0")
	}
	if os.Getenv("RAYFORM_E2E_RAY") == "simnode" {
		t.Skip("RAYFORM_E2E_RAY=simnode: the real vLLM runs on the real Ray")
	}
	l := startLab(t, "rfe2evl", "-vllm", "real")
	dir := l.dir // the lab's rayform.hcl
	// What lab up cost (the image layers are built once per lab cache).
	for _, line := range strings.Split(l.up, "\n") {
		if strings.Contains(line, " layer ") || strings.Contains(line, " is up: ") {
			t.Logf("lab up: %s", strings.TrimSpace(line))
		}
	}

	plan := l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode")
	mustCode(t, "plan", plan, exitChanges)
	mustContain(t, "plan", plan.stdout,
		"# (spark1: complete)",
		"# (spark2: absent, ",
		"to stage from spark1 over the fabric",
		`+ model                  = "`+lab.HubRepoLlama+`"`,
		"+ tensor_parallel_size   = 2")

	apply := l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	if apply.code != exitOK {
		// vLLM's wrapper error names no cause: keep both nodes' logs.
		head, _ := l.ssh("spark1", "docker exec rayform-spark sh -c 'cat /tmp/rayform/serve/serve-qwen.log'")
		worker, _ := l.ssh("spark2", "docker exec rayform-spark sh -c 'tail -n 60 /tmp/ray/session_latest/logs/worker-*.err'")
		t.Logf("spark1's vllm serve log:\n%s\nspark2's Ray worker logs:\n%s", head, worker)
	}
	mustCode(t, "apply", apply, exitOK)
	t.Logf("apply took %s", apply.elapsed.Round(time.Second))
	mustContain(t, "apply", apply.stdout, "model.tiny: stage "+lab.HubRepoLlama, "Apply complete!")
	staged := strings.Index(apply.stdout, "model.tiny: stage ")
	serve := strings.Index(apply.stdout, "vllm_serve.qwen: Creating...")
	if staged < 0 || serve < 0 || staged > serve {
		t.Errorf("staging (at %d) must come before the serve starts (at %d):\n%s", staged, serve, apply.stdout)
	}

	ep := l.rayform("", "-chdir", dir, "output", "-raw", "endpoint")
	mustCode(t, "output endpoint", ep, exitOK)
	endpoint := strings.TrimSpace(ep.stdout)
	if endpoint != "http://"+lab.FabricIP(0)+":8000/v1" {
		t.Fatalf("endpoint output %q, want the head's fabric address", endpoint)
	}
	out, err := l.ssh("spark1", "curl -sS -m 120 "+endpoint+"/completions -H 'Content-Type: application/json' "+
		`-d '{"model":"tiny","prompt":"The capital of France is","max_tokens":8,"temperature":0}'`)
	if err != nil {
		t.Fatalf("completion through the endpoint: %v\n%s", err, out)
	}
	var completion struct {
		Model   string `json:"model"`
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &completion); err != nil || completion.Model != "tiny" || len(completion.Choices) != 1 ||
		completion.Usage.PromptTokens < 2 || completion.Usage.CompletionTokens < 1 {
		t.Fatalf("completion: %v\n%s", err, out)
	}

	version, err := l.ssh("spark1", `docker exec rayform-spark python3 -c 'import vllm; print("vllm", vllm.__version__)'`)
	if err != nil || !strings.Contains(version, "vllm "+lab.VLLMVersion+"\n") {
		t.Errorf("import vllm in the head's container: %v\n%s", err, version)
	}
	procs, err := l.ssh("spark2", "docker exec rayform-spark ps -eo args")
	if err != nil || !strings.Contains(procs, "ray::RayWorkerProc") {
		t.Errorf("no vLLM Ray worker (ray::RayWorkerProc) in spark2's container: %v\n%s", err, procs)
	}
	logs := l.rayform("", "-chdir", dir, "logs", "vllm_serve.qwen")
	mustContain(t, "vllm serve's log", logs.stdout+logs.stderr, "world_size=2", "Application startup complete",
		// The plugin's check (labimage/vllm-platform) and vLLM's fallback
		// to torch.distributed for the tp group across the nodes.
		"agree on the SHM group name but not on the shared memory",
		"CPU SHM communicator disabled for group tp")
	// rayform's prediction of the KV cache (modelfit.KVCapacity, shown by
	// plan and apply) against the real vLLM's own line in its log.
	predicted := regexp.MustCompile(`vLLM will report "(?:CPU )?(KV cache size: [0-9,]+ tokens, Maximum concurrency for [0-9,]+ tokens per request: [0-9.]+x)"`).
		FindStringSubmatch(regexp.MustCompile(`\n\s*`).ReplaceAllString(plan.stdout+plan.stderr+apply.stdout+apply.stderr, " "))
	if predicted == nil {
		t.Errorf("neither plan nor apply predicted the KV cache vLLM reports:\n%s\n%s", plan.stdout, apply.stdout)
	} else if !strings.Contains(logs.stdout, "CPU "+predicted[1]) {
		t.Errorf("rayform predicted %q; vLLM's log says otherwise:\n%s", predicted[1], logs.stdout)
	}

	// status: the real server's health, its model and its /metrics.
	status := l.rayform("", "-chdir", dir, "status")
	mustCode(t, "status", status, exitOK)
	mustContain(t, "status", status.stdout, "health    ok (/health 200)", "model     tiny",
		" running, 0 waiting", "kv cache  ", "% used", "endpoint  "+endpoint)
	sj := l.rayform("", "-chdir", dir, "status", "-json")
	mustCode(t, "status -json", sj, exitOK)
	var rep statusJSON
	if err := json.Unmarshal([]byte(sj.stdout), &rep); err != nil || !rep.Healthy || len(rep.Serves) != 1 {
		t.Fatalf("status -json: %v\n%s", err, sj.stdout)
	}
	if m := rep.Serves[0].Metrics; m == nil || m.KVCacheUsage == nil || m.RequestsFinished < 1 ||
		m.GenerationTokens < float64(completion.Usage.CompletionTokens) || m.PromptTokens < float64(completion.Usage.PromptTokens) {
		t.Errorf("status -json: the real vLLM's /metrics (a finished request, its tokens, KV cache usage): %+v\n%s", m, sj.stdout)
	}

	again := l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode")
	mustCode(t, "second plan", again, exitOK)
	mustContain(t, "second plan", again.stdout, "No changes. Your infrastructure matches the configuration.")

	destroy := l.rayform("", "-chdir", dir, "destroy", "-auto-approve")
	mustCode(t, "destroy", destroy, exitOK)
	// Nothing of ours is left: no container, running or stopped, on
	// either node (the lab's nodes run only this test's containers).
	for _, n := range []string{"spark1", "spark2"} {
		if out, err := l.ssh(n, "docker ps -aq"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("containers on %s after destroy: %q %v", n, out, err)
		}
	}
	after := l.rayform("", "-chdir", dir, "plan", "-destroy", "-detailed-exitcode")
	mustCode(t, "plan -destroy after destroy", after, exitOK)
}
