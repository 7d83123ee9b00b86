//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EReadOnlyWithoutSecrets is issue 33 item 3: after an apply given
// a sensitive variable, the read-only commands run without it. Before,
// status and logs failed with "No value for required variable". status
// still judges the cluster whose env holds the secret as it is (it cannot
// compare what it was not given, and says nothing is wrong), and a serve
// that went down is listed once under problems.
func TestE2EReadOnlyWithoutSecrets(t *testing.T) {
	t.Parallel()
	// Fast mode: the subject is which values the read-only commands need,
	// not Ray.
	l := startLab(t, "rfe2ero", fastRay...)
	body := "variable \"hf_token\" {\n  type      = string\n  sensitive = true\n}\n" +
		strings.Replace(clusterConfig("enp1s0f1np1", seedImage, false, 0.85),
			"  memory_monitor = false\n", "  memory_monitor = false\n  env            = { HF_TOKEN = var.hf_token }\n", 1)
	dir := l.config(body)
	varFile := filepath.Join(t.TempDir(), "secret.rfvars")
	if err := os.WriteFile(varFile, []byte(fmt.Sprintf("hf_token = %q\n", "hf_readonly_e2e_token")), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }
	mustCode(t, "apply", run("apply", "-auto-approve", "-var-file="+varFile), exitOK)

	for _, args := range [][]string{
		{"status"}, {"status", "-json"}, {"logs", "-tail", "5", "vllm_serve.qwen"}, {"logs", "-tail", "5", "ray_cluster.spark"},
		{"output"}, {"show"}, {"graph"}, {"validate"},
	} {
		r := run(args...)
		what := strings.Join(args, " ")
		mustCode(t, what+" without the variable", r, exitOK)
		if strings.Contains(r.stdout+r.stderr, "No value for required variable") {
			t.Errorf("%s asks for the variable:\n%s", what, r)
		}
	}
	r := run("status", "-json")
	var rep statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status -json: %v\n%s", err, r.stdout)
	}
	if !rep.Healthy || len(rep.Serves) != 1 || rep.Serves[0].Health != "ok" {
		t.Errorf("status without the variable: healthy %v, problems %v, serves %+v", rep.Healthy, rep.Problems, rep.Serves)
	}
	// plan and apply do need it: they compare and start with it.
	r = run("plan")
	mustCode(t, "plan without the variable", r, exitError)
	mustContain(t, "plan without the variable", r.stderr, "No value for required variable")

	// The serve goes down: status lists it once.
	if out, err := l.ssh("spark1", "docker exec rayform-spark sh -c 'kill -9 $(cat /tmp/rayform/serve/serve-qwen.pid)'"); err != nil {
		t.Fatalf("stopping the serve: %v\n%s", err, out)
	}
	waitFor(t, "the serve down", time.Minute, func() bool {
		r := run("status", "-json")
		var rep statusJSON
		return json.Unmarshal([]byte(r.stdout), &rep) == nil && len(rep.Serves) == 1 && rep.Serves[0].Health == "down"
	})
	r = run("status", "-json")
	mustCode(t, "status with the serve down", r, exitUnhealthy)
	rep = statusJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range rep.Problems {
		if strings.HasPrefix(p, "vllm_serve.qwen") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the down serve is listed %d times under problems: %q", n, rep.Problems)
	}
}
