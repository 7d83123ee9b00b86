package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/state"
)

// appliedPair is the DGX Spark pair's configuration in a temporary
// directory with a state as an apply leaves it (each node's fabric
// address recorded). Its hosts do not exist: nothing may contact them.
func appliedPair(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(repoPath(t, "examples/dgx-spark-pair/main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := state.New("pair")
	st.Set("ray_cluster.spark", state.Resource{Type: "ray_cluster", Container: "rayform-spark", Hosts: []state.Host{
		{Node: "spark1", Host: "192.0.2.1", FabricAddress: "192.168.200.12", FabricInterface: "enp1s0f1np1"},
		{Node: "spark2", Host: "192.0.2.2", FabricAddress: "192.168.200.13", FabricInterface: "enp1s0f1np1"},
	}})
	st.Set("vllm_serve.qwen", state.Resource{Type: "vllm_serve", Container: "rayform-spark", Hosts: []state.Host{{Node: "spark1", Host: "192.0.2.1"}}})
	if err := st.Save(filepath.Join(dir, state.DefaultPath)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOutputCommand(t *testing.T) {
	dir := appliedPair(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		stdout   string // exact when set
		contains []string
		stderr   string
	}{
		{name: "all", args: nil, contains: []string{`endpoint = "http://192.168.200.12:8000/v1"`, `ray_address = "192.168.200.12:6379"`, `"spark2" = "192.168.200.13"`}},
		{name: "one", args: []string{"endpoint"}, stdout: "\"http://192.168.200.12:8000/v1\"\n"},
		{name: "raw", args: []string{"-raw", "endpoint"}, stdout: "http://192.168.200.12:8000/v1"},
		{name: "raw after the name", args: []string{"endpoint", "-raw"}, stdout: "http://192.168.200.12:8000/v1"},
		{name: "raw of a map", args: []string{"-raw", "fabric_addresses"}, wantCode: ExitError, stderr: "Unsupported value for raw output"},
		{name: "json one", args: []string{"-json", "ray_address"}, stdout: "\"192.168.200.12:6379\"\n"},
		{name: "misspelled", args: []string{"endpont"}, wantCode: ExitError, stderr: `Did you mean "endpoint"?`},
		{name: "-raw without a name", args: []string{"-raw"}, wantCode: ExitError, stderr: "-raw needs an output name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runIn(t, dir, append([]string{"output"}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if tt.stdout != "" && r.stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, tt.stdout)
			}
			for _, w := range tt.contains {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, r.stderr)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		r := runIn(t, dir, "output", "-json")
		var doc map[string]struct {
			Sensitive bool            `json:"sensitive"`
			Type      json.RawMessage `json:"type"`
			Value     json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("output -json is not JSON: %v\n%s", err, r.stdout)
		}
		if e := doc["endpoint"]; string(e.Value) != `"http://192.168.200.12:8000/v1"` || string(e.Type) != `"string"` || e.Sensitive {
			t.Errorf("endpoint = %+v", e)
		}
	})
	t.Run("nothing applied", func(t *testing.T) {
		r := runIn(t, repoPath(t, "examples/dgx-spark-pair"), "output", "-state", filepath.Join(t.TempDir(), "none.json"))
		if r.code != ExitOK || r.stdout != "" || !strings.Contains(r.stderr, "No outputs found") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

func TestShowCommand(t *testing.T) {
	dir := appliedPair(t)
	pf := filepath.Join(t.TempDir(), "destroy.plan")
	f, err := planfile.New(planfile.Current{RayformVersion: testVersion, ConfigFiles: map[string][]byte{"main.hcl": []byte("x")}, StateLineage: "l"},
		planfile.Planned{Destroy: true, Targets: []string{"vllm_serve.qwen"}, Summary: planfile.Summary{Destroy: 1},
			Changes:      []planfile.Change{{Addr: "vllm_serve.qwen", Action: "delete"}},
			Rendered:     "  # vllm_serve.qwen will be destroyed\nPlan: 0 to add, 0 to change, 1 to destroy.\n",
			RenderedJSON: []json.RawMessage{json.RawMessage(`{"type":"version"}`), json.RawMessage(`{"type":"change_summary"}`)}},
		planfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := planfile.Write(pf, f); err != nil {
		t.Fatal(err)
	}
	r := runIn(t, dir, "show", pf)
	if r.code != ExitOK {
		t.Fatalf("show: exit %d\n%s", r.code, r.stderr)
	}
	for _, w := range []string{"Options: -destroy -target=vllm_serve.qwen", "# vllm_serve.qwen will be destroyed", "Plan: 0 to add, 0 to change, 1 to destroy."} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("show lacks %q:\n%s", w, r.stdout)
		}
	}
	r = runIn(t, dir, "show", "-json", pf)
	if r.code != ExitOK || r.stdout != "{\"type\":\"version\"}\n{\"type\":\"change_summary\"}\n" {
		t.Errorf("show -json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runIn(t, dir, "show")
	if r.code != ExitOK || !strings.Contains(r.stdout, "# ray_cluster.spark") || !strings.Contains(r.stdout, "host spark2 = 192.0.2.2 (fabric 192.168.200.13 on enp1s0f1np1)") {
		t.Errorf("show of the state: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
