//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
// Its lab takes the lab pool's whole heavy share (labpool_test.go:
// realVLLMLab): no real-Ray lab runs beside it. Its first
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

	// Issue 39's "Done when" on the real vLLM: changes at the edges.
	realVLLMChanges(t, l, dir)

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

// realVLLMChanges makes the serve changes of issue 39's "Done when" on the
// lab's real vLLM, as an operator would, each measured by a client polling
// /health every 0.5 s from the worker: (c) a misspelt extra_args option is
// refused by plan at file:line with the nearest real option; a
// max_model_len change (4096 -> 2048), its downtime measured and stated
// beforehand by plan; (a) a change that fails at start leaves the previous
// serve answering, apply exits 1 naming the cause and the restore, and the
// outage it prints is what the client saw (±2 s); (d) logs -previous shows
// the failed start's log after the restore.
func realVLLMChanges(t *testing.T, l *e2eLab, dir string) {
	t.Helper()
	hcl := filepath.Join(dir, "rayform.hcl")
	args := `extra_args             = ["--kv-cache-memory-bytes", "64M", "--enforce-eager", "--dtype", "float32"]`
	health := "http://" + lab.FabricIP(0) + ":8000/health"

	// (c) A misspelt option: plan refuses it, at its line, with the
	// nearest real option.
	editFile(t, hcl, args, strings.Replace(args, `"--enforce-eager"`, `"--enforce-eagr"`, 1))
	typo := l.rayform("", "-chdir", dir, "plan")
	mustCode(t, "plan with a misspelt option", typo, exitError)
	line := 1 + strings.Count(mustRead(t, hcl)[:strings.Index(mustRead(t, hcl), "extra_args ")], "\n")
	mustContain(t, "plan with a misspelt option", typo.stdout+typo.stderr, "Unknown vLLM option",
		fmt.Sprintf("rayform.hcl line %d", line), `"--enforce-eagr"`, "Did you mean", "--enforce-eager?")
	editFile(t, hcl, strings.Replace(args, `"--enforce-eager"`, `"--enforce-eagr"`, 1), args)

	// A max_model_len change: plan says it is stop-then-start and the
	// downtime to expect (the first start's load time); the client's view.
	editFile(t, hcl, "max_model_len          = 4096", "max_model_len          = 2048")
	pl := l.rayform("", "-chdir", dir, "plan")
	mustContain(t, "plan of the max_model_len change", pl.stdout, "stop-then-start: its endpoint is down while the new serve loads, about ")
	p := l.pollHealth(t, "spark2", health)
	change := l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	mustCode(t, "apply of the max_model_len change", change, exitOK)
	p.awaitAnswer(t, time.Minute)
	seen, fails := p.stop().outage()
	t.Logf("max_model_len 4096 -> 2048: apply %s; the client saw %.1f s of downtime (%d failed polls); plan said: %s",
		change.elapsed.Round(time.Second), seen.Seconds(), fails, lineWith(pl.stdout, "stop-then-start"))

	// (a) A change that fails at start (a tokenizer the hub does not
	// have): the previous serve is put back.
	editFile(t, hcl, args, strings.Replace(args, `"--dtype", "float32"]`, `"--dtype", "float32", "--tokenizer", "rayform-lab/no-such-tokenizer"]`, 1))
	p = l.pollHealth(t, "spark2", health)
	failed := l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	p.awaitAnswer(t, 2*time.Minute)
	polls := p.stop()
	mustCode(t, "apply of a change that fails", failed, exitError)
	out := failed.stdout + failed.stderr
	mustContain(t, "apply of a change that fails", out, "no-such-tokenizer",
		"The previous serve of vllm_serve.qwen is back and answering on port 8000")
	m := regexp.MustCompile(`The endpoint was down for (\d+\.\d) s`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("apply does not say how long the endpoint was down:\n%s", out)
	}
	printed, _ := strconv.ParseFloat(m[1], 64)
	seen, fails = polls.outage()
	t.Logf("failed change: apply printed %.1f s of downtime, the client saw %.1f s (%d failed polls); apply %s",
		printed, seen.Seconds(), fails, failed.elapsed.Round(time.Second))
	if d := seen.Seconds() - printed; d > 2 || d < -2 {
		t.Errorf("apply printed an outage of %.1f s, the client saw %.1f s", printed, seen.Seconds())
	}
	// (d) The failed start's log, kept.
	prev := l.rayform("", "-chdir", dir, "logs", "-previous", "vllm_serve.qwen")
	mustCode(t, "logs -previous", prev, exitOK)
	mustContain(t, "logs -previous", prev.stdout, "no-such-tokenizer")
	editFile(t, hcl, strings.Replace(args, `"--dtype", "float32"]`, `"--dtype", "float32", "--tokenizer", "rayform-lab/no-such-tokenizer"]`, 1), args)
	mustCode(t, "plan after going back", l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode"), exitOK)
	editFile(t, hcl, "max_model_len          = 2048", "max_model_len          = 4096")
}

// editFile replaces from with to in the file at path.
func editFile(t *testing.T, path, from, to string) {
	t.Helper()
	src := mustRead(t, path)
	if !strings.Contains(src, from) {
		t.Fatalf("%s does not contain %q", path, from)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(src, from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lineWith is the first line of s containing sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
