package plan

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
)

var update = flag.Bool("update", false, "rewrite golden files")

func str(s string) cty.Value { return cty.StringVal(s) }

func renderCases() map[string]*Plan {
	secret := str("hf_abcdef123456")
	return map[string]*Plan{
		"no-changes": {Changes: []ResourceChange{{Address: "ray_cluster.main", Action: NoOp}}},
		"create": {Changes: []ResourceChange{{
			Address: "ray_cluster.main", Action: Create, Hosts: []string{"spark1", "spark2"},
			Attrs: []AttrChange{
				{Name: "image", Before: cty.NullVal(cty.String), After: str("hellohal2064/vllm-qwen3.5-gb10")},
				{Name: "head_address", Before: cty.NullVal(cty.String), After: cty.UnknownVal(cty.String)},
				{Name: "workers", Before: cty.NullVal(cty.List(cty.String)), After: cty.ListVal([]cty.Value{str("spark2")})},
				{Name: "env", Before: cty.NullVal(cty.Map(cty.String)), After: cty.MapVal(map[string]cty.Value{"NCCL_SOCKET_IFNAME": str("enp1s0f1np1"), "HF_TOKEN": secret}), Sensitive: true},
				{Name: "port", Before: cty.NullVal(cty.Number), After: cty.NumberIntVal(6379)},
			},
		}}},
		"replace-and-update": {Changes: []ResourceChange{
			{
				Address: "ray_cluster.main", Action: Replace,
				Reasons: []string{"ray head registered as 10.1.230.180; want 192.168.200.12"},
				Attrs: []AttrChange{
					{Name: "head_node_ip", Before: str("10.1.230.180"), After: str("192.168.200.12"), ForcesReplacement: true},
					{Name: "image", Before: str("img:1"), After: str("img:1")},
					{Name: "env", Before: cty.MapVal(map[string]cty.Value{"A": str("1"), "B": str("2")}), After: cty.MapVal(map[string]cty.Value{"A": str("1"), "C": str("3")})},
				},
			},
			{
				Address: "vllm_serve.qwen", Action: Update,
				Attrs: []AttrChange{
					{Name: "max_model_len", Before: cty.NumberIntVal(32768), After: cty.NumberIntVal(16384)},
					{Name: "gpu_memory_utilization", Before: cty.NumberFloatVal(0.9), After: cty.NumberFloatVal(0.85)},
					{Name: "extra_args", Before: cty.ListVal([]cty.Value{str("--enforce-eager")}), After: cty.ListVal([]cty.Value{str("--trust-remote-code")})},
				},
			},
			{Address: "vllm_serve.old", Action: Delete, Attrs: []AttrChange{{Name: "model", Before: str("Qwen/Qwen3-8B"), After: cty.NullVal(cty.String)}}},
		}},
		"drift-and-findings": {
			Drift: []Drift{{Address: "ray_cluster.main", Host: "spark1", Summary: "the head container was restarted outside rayform",
				Attrs: []AttrChange{{Name: "head_node_ip", Before: str("192.168.200.12"), After: str("10.1.230.180")}}}},
			Changes: []ResourceChange{{Address: "ray_cluster.main", Action: Replace, Attrs: []AttrChange{{Name: "head_node_ip", Before: str("10.1.230.180"), After: str("192.168.200.12"), ForcesReplacement: true}}}},
			Findings: []Finding{
				{Severity: Error, Address: "network.fabric", Host: "spark2", Summary: "no address in 192.168.200.0/24 on spark2", Detail: "enp1s0f1np1 is up but has no IPv4 address.", Fix: "assign the fabric address, e.g.\n  ip addr add 192.168.200.13/24 dev enp1s0f1np1"},
				{Severity: Warning, Address: "vllm_serve.qwen", Summary: "memory monitor on unified memory", Detail: "0.90 × 119.70 GiB leaves 11.97 GiB."},
			},
			Outputs: []OutputChange{{Name: "endpoint", Value: cty.UnknownVal(cty.String)}, {Name: "token", Value: secret, Sensitive: true}},
		},
		"refresh-only": {RefreshOnly: true, Drift: []Drift{{Address: "vllm_serve.qwen", Host: "spark1", Summary: "serve process is not running",
			Attrs: []AttrChange{{Name: "running", Before: cty.True, After: cty.False}}}}},
	}
}

func TestRenderGolden(t *testing.T) {
	fixed := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for name, p := range renderCases() {
		t.Run(name, func(t *testing.T) {
			var txt, col, js bytes.Buffer
			if err := RenderText(&txt, p, TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := RenderText(&col, p, TextOptions{Color: true}); err != nil {
				t.Fatal(err)
			}
			if err := RenderJSON(&js, p, JSONOptions{Version: "test", Now: func() time.Time { return fixed }}); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(txt.String(), "\x1b[") {
				t.Errorf("colour escape in no-colour output")
			}
			if !strings.Contains(col.String(), "\x1b[") {
				t.Errorf("no colour escape in colour output")
			}
			for _, out := range []string{txt.String(), col.String(), js.String()} {
				if strings.Contains(out, "hf_abcdef123456") {
					t.Fatalf("secret leaked into output:\n%s", out)
				}
			}
			for i, line := range strings.Split(strings.TrimSpace(js.String()), "\n") {
				var ev map[string]any
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("line %d is not JSON: %v", i+1, err)
				}
				for _, k := range []string{"@level", "@message", "@module", "@timestamp", "type"} {
					if _, ok := ev[k]; !ok {
						t.Errorf("line %d lacks %s", i+1, k)
					}
				}
				if i == 0 && ev["type"] != "version" {
					t.Errorf("first event is %v, want version", ev["type"])
				}
			}
			checkGolden(t, filepath.Join("..", "..", "testdata", "plan", "render", name+".txt"), txt.Bytes())
			checkGolden(t, filepath.Join("..", "..", "testdata", "plan", "render", name+".json"), js.Bytes())
		})
	}
}

func TestCounts(t *testing.T) {
	p := renderCases()["replace-and-update"]
	got := p.Counts()
	want := Counts{Add: 1, Change: 1, Destroy: 2}
	if got != want {
		t.Fatalf("Counts() = %+v, want %+v", got, want)
	}
	if !p.HasChanges() {
		t.Fatal("HasChanges() = false for a plan with a replace")
	}
	if renderCases()["no-changes"].HasChanges() {
		t.Fatal("HasChanges() = true for a no-op plan")
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run with -update to accept):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
