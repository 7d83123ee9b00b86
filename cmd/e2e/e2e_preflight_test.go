//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/transport/shell"
)

// preflightCommit names the snapshot the lab's Hugging Face cache holds
// (refs/main points at it, as huggingface_hub writes it).
const preflightCommit = "4e20de362430cd3b72f300e6b0f18e50e7166e08"

// e2ePreflight is a lab cluster of two nodes with two 16 GiB GPUs each,
// whose Hugging Face cache is the host directory %[1]s; the serve's body
// is %[2]s.
const e2ePreflight = `
network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = "enp1s0f1np1"
}

ray_cluster "spark" {
  image           = %[3]q
  head            = node.spark1
  workers         = [node.spark2]
  network         = network.fabric
  memory_monitor  = false
  dataplane_check = false
  volumes         = ["%[1]s:/root/.cache/huggingface"]
}

vllm_serve "m" {
  cluster       = ray_cluster.spark
  ready_timeout = "2m"
%[2]s}
`

// TestE2EPreflightStopsAtPlan: plan reads the model's own config.json from
// the head's Hugging Face cache (written there over SSH, as a download
// would leave it) and stops at the misfit's attribute, file:line, before
// anything is touched; apply refuses the same and creates no container.
// The override env turns the context-length error into a warning, and a
// model that is not in the cache gets a note, no finding.
func TestE2EPreflightStopsAtPlan(t *testing.T) {
	// Fast mode: the subject is plan's preflight of the model against the
	// nodes' memory, which stops before any Ray starts.
	l := startLab(t, "rfe2epf", append([]string{"-gpus", "2", "-unified=false", "-memory-gib", "16"}, fastRay...)...)
	hf := filepath.Join(l.dir, "hf-cache")
	for _, m := range []struct{ id, dir string }{
		{"meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b-instruct"},
		{"Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct"},
	} {
		l.writeModel(t, "spark1", hf, m.id, m.dir)
	}
	tests := []struct {
		name  string
		serve string
		attr  string // the attribute the finding points at
		code  int
		want  []string
	}{
		{"tp does not divide the heads", `  model                = "meta-llama/Llama-3.2-1B-Instruct"
  tensor_parallel_size = 3
  max_model_len        = 8192
`, "tensor_parallel_size", exitError,
			[]string{"Error: tensor_parallel_size 3 does not divide the model's 32 attention heads",
				"Total number of attention heads (32) must be divisible by tensor parallel size (3).",
				"Fix: Use a tensor_parallel_size that divides 32 and its KV heads (1, 2, 4, 8, 16, 32)",
				"models--meta-llama--Llama-3.2-1B-Instruct/snapshots/" + preflightCommit + "/config.json"}},
		{"model too large for the GPUs", `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  gpu_memory_utilization = 0.8
`, "gpu_memory_utilization", exitError,
			[]string{"Error: the model will not fit: 14.19 GiB of weights per GPU, 12.80 GiB available (0.8 × 16.00 GiB of GPU memory = 12.80 GiB)",
				"Fix: Spread it over more GPUs (at least 2 in all)"}},
		{"max_model_len too long", `  model                = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size = 4
  max_model_len        = 131072
`, "max_model_len", exitError,
			[]string{"Error: max_model_len 131072 exceeds the 32768 tokens the model supports (max_position_embeddings)",
				"Fix: Set max_model_len to at most 32768"}},
		{"max_model_len with vLLM's override", `  model                = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size = 4
  max_model_len        = 131072
  env = {
    VLLM_ALLOW_LONG_MAX_MODEL_LEN = "1"
  }
`, "max_model_len", exitChanges,
			[]string{"Warning: max_model_len 131072 exceeds the 32768 tokens the model supports", "Plan: 2 to add, 0 to change, 0 to destroy."}},
		{"model not in the cache", `  model                = "Qwen/Qwen2.5-0.5B-Instruct"
  tensor_parallel_size = 3
`, "", exitChanges,
			[]string{"Note: the model preflight of vllm_serve.m did not run: spark1 has no " + hf + "/hub/models--Qwen--Qwen2.5-0.5B-Instruct/refs/main",
				"Plan: 2 to add, 0 to change, 0 to destroy."}},
	}
	before := l.containers(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := l.config(fmt.Sprintf(e2ePreflight, hf, tt.serve, seedImage))
			src := l.twoGPUs(t, dir)
			r := l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode")
			mustCode(t, "plan", r, tt.code)
			out := r.stdout + r.stderr
			mustContain(t, "plan", out, tt.want...)
			if tt.attr != "" {
				line := 1 + strings.Count(src[:strings.Index(src, "  "+tt.attr+" ")], "\n")
				mustContain(t, "plan", out, fmt.Sprintf("with vllm_serve.m, at main.hcl:%d", line))
			} else if strings.Contains(out, "Error:") || strings.Contains(out, "Warning:") {
				t.Errorf("a finding without the model's files:\n%s", r)
			}
			if tt.code == exitError {
				r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
				mustCode(t, "apply", r, exitError)
				mustContain(t, "apply", r.stdout+r.stderr, tt.want[0])
			}
			if after := l.containers(t); after != before {
				t.Errorf("containers changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// writeModel writes a model's files from testdata/modelfit into the Hugging
// Face cache at hf on node, over SSH, laid out as huggingface_hub does:
// refs/main names the snapshot directory holding the files.
func (l *e2eLab) writeModel(t *testing.T, node, hf, id, dir string) {
	t.Helper()
	repo := hf + "/hub/models--" + strings.ReplaceAll(id, "/", "--")
	snap := repo + "/snapshots/" + preflightCommit
	cmd := "mkdir -p " + shell.Quote(repo+"/refs") + " " + shell.Quote(snap) +
		" && printf %s " + preflightCommit + " >" + shell.Quote(repo+"/refs/main")
	for _, f := range []string{"config.json", "model.safetensors.index.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "modelfit", dir, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		cmd += " && printf %s " + shell.Quote(string(b)) + " >" + shell.Quote(snap+"/"+f)
	}
	if out, err := l.ssh(node, cmd); err != nil {
		t.Fatalf("writing %s on %s: %v\n%s", id, node, err, out)
	}
}

// twoGPUs declares the lab's two GPUs per node in the configuration at dir
// and returns its main.hcl.
func (l *e2eLab) twoGPUs(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "main.hcl")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(string(b), "gpus          = 1\n", "gpus          = 2\n")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}

// containers lists every container on the lab's nodes, with its ID and
// status.
func (l *e2eLab) containers(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, node := range []string{"spark1", "spark2"} {
		out, err := l.ssh(node, "docker ps -a --no-trunc --format '{{.ID}} {{.Names}} {{.State}}'; echo end")
		if err != nil {
			t.Fatalf("docker ps on %s: %v\n%s", node, err, out)
		}
		fmt.Fprintf(&b, "%s:\n%s", node, out)
	}
	return b.String()
}
