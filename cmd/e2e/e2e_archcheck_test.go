//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2EArchCheckNotChecked: with the model's config.json on the head,
// plan says the image will be asked in apply; apply asks the head's Ray
// container (the lab image has no python3: not checked, nothing stops),
// records the answer in the state under the image ID, and the next plan
// reads it from the state instead of asking again, and does not repeat
// it for the model the serve runs.
func TestE2EArchCheckNotChecked(t *testing.T) {
	archCheckNotChecked(t, "rfe2earch", "the image has no python3")
}

// TestE2EArchCheckNoVLLM: the lab's -torch image has python3 (and torch)
// but no vLLM: the query runs for real in the head container and its
// answer says so; not checked, nothing stops.
func TestE2EArchCheckNoVLLM(t *testing.T) {
	requireTorch(t)
	archCheckNotChecked(t, "rfe2earcht", "the image's python3 cannot import vLLM's model registry (ModuleNotFoundError: No module named 'vllm')", "-torch")
}

func archCheckNotChecked(t *testing.T, name, why string, flags ...string) {
	// Fast mode: the subject is plan's query of the image's vLLM model
	// registry, which runs before (and without) Ray.
	l := startLab(t, name, append(append([]string{"-gpus", "2", "-unified=false", "-memory-gib", "16"}, flags...), fastRay...)...)
	hf := filepath.Join(l.dir, "hf-cache")
	l.writeModel(t, "spark1", hf, "meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b-instruct")
	serve := `  model                = "meta-llama/Llama-3.2-1B-Instruct"
  tensor_parallel_size = 2
  max_model_len        = 8192
`
	dir := l.config(fmt.Sprintf(e2ePreflight, hf, serve, seedImage))
	l.twoGPUs(t, dir)

	r := l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode")
	mustCode(t, "plan", r, exitChanges)
	mustContain(t, "plan", r.stdout+r.stderr, "Note: the architecture check of vllm_serve.m runs in apply, before vllm serve starts")

	r = l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
	mustCode(t, "apply", r, exitOK)
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "asked the image") {
			t.Log(strings.TrimSpace(line)) // what the query cost
		}
	}
	mustContain(t, "apply", r.stdout, "check the model's architecture against the image on spark1", "not checked: "+why)

	data, err := os.ReadFile(filepath.Join(dir, ".rayform", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Images map[string]struct {
			Unchecked string  `json:"unchecked"`
			Seconds   float64 `json:"seconds"`
		} `json:"images"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Images) != 1 {
		t.Fatalf("state images %+v, want the head's image", st.Images)
	}
	for id, im := range st.Images {
		if !strings.HasPrefix(id, "sha256:") || im.Unchecked != why {
			t.Errorf("state image %s: %+v", id, im)
		}
	}

	// A changed serve is judged again, from the state: no apply needed;
	// the image that could not answer is not mentioned again for the
	// model the serve already runs (issue 33 item 8).
	src, err := os.ReadFile(filepath.Join(dir, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(strings.Replace(string(src), "max_model_len        = 8192", "max_model_len        = 4096", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode")
	mustCode(t, "plan", r, exitChanges)
	if strings.Contains(r.stdout+r.stderr, "runs in apply") {
		t.Errorf("plan would ask the image again:\n%s", r)
	}
	if strings.Contains(r.stdout+r.stderr, "architecture check") {
		t.Errorf("plan repeats what the image answered apply:\n%s", r)
	}
}
