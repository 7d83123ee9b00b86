//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// TestE2EModelCheckedAfterStaging is issue 33 item 2: a serve whose
// max_model_len exceeds its model's, with the weights downloaded by a
// model block in the same apply. plan cannot read config.json yet and
// says that apply checks it; apply stages the model, then stops before
// vllm serve starts with the finding plan shows once the files are there.
// Before, apply started the serve unchecked and the next plan was empty.
func TestE2EModelCheckedAfterStaging(t *testing.T) {
	t.Parallel()
	run := stagedModelLab(t, "rfe2emchk", "max_model_len          = 4096\n", "max_model_len          = 8192\n")

	r := run("plan", "-detailed-exitcode")
	mustCode(t, "plan", r, exitChanges)
	mustContain(t, "plan", r.stdout+r.stderr, "the model preflight of vllm_serve.s did not run", "apply stages it, then checks it before vLLM starts")

	const finding = "max_model_len 8192 exceeds the 4096 tokens the model supports"
	r = run("apply", "-auto-approve")
	mustCode(t, "apply", r, exitError)
	mustContain(t, "apply", r.stdout+r.stderr, "model.m: spark2: 25.2 MB of 25.2 MB (100%), done", "vllm_serve.s: check the staged model against the serve on spark1",
		"vllm serve s was not started: the staged model does not fit the serve", finding, "main.hcl:")
	if strings.Contains(r.stdout, "vllm_serve.s: start vllm serve") {
		t.Errorf("apply started the serve after the check failed:\n%s", r)
	}
	// The same finding plan shows now that the files are on the head.
	r = run("plan")
	mustCode(t, "plan after staging", r, exitError)
	mustContain(t, "plan after staging", r.stdout+r.stderr, finding)
}

// stagedModelLab starts a fast-mode lab (the subject is apply's order:
// stage, check, start; not Ray) with a 2-node configuration whose serve's
// model, the hub's tiny one, a model block stages, with old replaced by
// new in it, and returns rayform run in the configuration's directory.
func stagedModelLab(t *testing.T, name, old, new string) func(args ...string) result {
	t.Helper()
	l := startLab(t, name, append([]string{"-model-seed=false"}, fastRay...)...)
	dir := l.modelConfig(2, fmt.Sprintf("model \"m\" {\n  source   = %q\n  endpoint = \"http://%s\"\n}", lab.HubRepoTiny, lab.HubAddr()), "")
	main := filepath.Join(dir, "main.hcl")
	src := mustRead(t, main)
	if !strings.Contains(src, old) {
		t.Fatalf("the model config has no %q to change:\n%s", old, src)
	}
	if err := os.WriteFile(main, []byte(strings.Replace(src, old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }
}
