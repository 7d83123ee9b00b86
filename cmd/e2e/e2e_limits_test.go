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

// TestE2EArgMaxRefusedBeforeTeardown is issue 33 item 5: 20 sensitive env
// values of 120 KB, each within MAX_ARG_STRLEN, together beyond the
// lab hosts' ARG_MAX (a quarter of their stack limit, observed). Before,
// validate, plan and the pre-flight passed; apply stopped the running
// serve and then failed with "Argument list too long". Now plan refuses
// it with the host's numbers, apply changes nothing, and the serve that
// runs keeps serving.
func TestE2EArgMaxRefusedBeforeTeardown(t *testing.T) {
	t.Parallel()
	// Fast mode: the subject is the hosts' exec limits and apply's order,
	// not Ray.
	_, dir, run := appliedFastLab(t, "rfe2eargmax")

	main := filepath.Join(dir, "main.hcl")
	src := strings.Replace(mustRead(t, main), "  ready_timeout          = \"2m\"\n",
		"  ready_timeout          = \"2m\"\n  env                    = merge({ for i in range(20) : \"BIG_${i}\" => var.big }, { SMALL = \"x\" })\n", 1)
	src += fmt.Sprintf("\nvariable \"big\" {\n  type      = string\n  sensitive = true\n  default   = %q\n}\n", strings.Repeat("a", 120_000))
	if err := os.WriteFile(main, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCode(t, "validate", run("validate"), exitOK)
	r := run("plan")
	mustCode(t, "plan", r, exitError)
	mustContain(t, "plan", r.stdout+r.stderr, "A command of this resource is too long for its host",
		"vllm serve qwen on spark1 cannot run", "(ARG_MAX: a quarter of the")
	r = run("apply", "-auto-approve")
	mustCode(t, "apply", r, exitError)
	mustContain(t, "apply", r.stdout+r.stderr, "A command of this resource is too long for its host")
	if strings.Contains(r.stdout+r.stderr, "Argument list too long\n") || strings.Contains(r.stdout+r.stderr, "Destroying") {
		t.Errorf("apply acted before refusing:\n%s", r)
	}

	// status reports the configuration's refused change as a problem
	// (exit 2); the serve itself must still be up.
	r = run("status", "-json")
	mustCode(t, "status -json", r, exitChanges)
	var rep statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status -json: %v\n%s", err, r.stdout)
	}
	if len(rep.Serves) != 1 || rep.Serves[0].Health != "ok" {
		t.Fatalf("the serve no longer serves after the refused apply:\n%s", r.stdout)
	}
}

// appliedFastLab brings up a lab in the fast mode (simnode's Ray), applies
// the lab's cluster and serve (clusterConfig) and returns the lab, the
// configuration's directory and a runner of rayform in it: the start of
// the tests whose subject is a day-2 change, not Ray.
func appliedFastLab(t *testing.T, name string) (*e2eLab, string, func(args ...string) result) {
	t.Helper()
	l := startLab(t, name, fastRay...)
	dir := l.config(clusterConfig("enp1s0f1np1", seedImage, false, 0.85))
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }
	mustCode(t, "apply", run("apply", "-auto-approve"), exitOK)
	return l, dir, run
}
