//go:build linux

package lab

import (
	"context"
	"slices"
	"testing"
)

// TestCommandPassesInputVariables checks that lab exec hands rayform's
// input variables (RAYFORM_VAR_*) to the command, as running rayform
// outside the lab would, and nothing else of the caller's environment.
func TestCommandPassesInputVariables(t *testing.T) {
	t.Setenv("RAYFORM_VAR_hf_token", "hf_x")
	t.Setenv("UNRELATED_SECRET", "no")
	l := &Lab{Dir: "/tmp/lab", ClientNetns: "lab-client", ClientHome: "/tmp/lab/client-home"}
	cmd, err := l.Command(context.Background(), ClientName, "true")
	if err != nil {
		t.Skipf("no ip(8): %v", err)
	}
	if !slices.Contains(cmd.Env, "RAYFORM_VAR_hf_token=hf_x") {
		t.Errorf("RAYFORM_VAR_hf_token not passed: %q", cmd.Env)
	}
	for _, kv := range cmd.Env {
		if kv == "UNRELATED_SECRET=no" {
			t.Errorf("the caller's other variables leaked into the lab: %q", cmd.Env)
		}
	}
}
