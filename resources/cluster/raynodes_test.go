package cluster_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/cluster"
)

// observed reads a probe fixture (testdata/observe) as the body of an
// answer.
func observed(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "observe", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseRayNodes: Ray's node table as the dashboard writes it (rows,
// resources with humanized bytes, a truncated list said so), as ray list
// nodes prints it (by the fallback command), and what is not one.
func TestParseRayNodes(t *testing.T) {
	ok := func(body, via string) observe.HTTPResult {
		return observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Via: via, Body: body}
	}
	r := cluster.ParseRayNodes(ok(observed(t, "dashboard-nodes.json"), "curl"), true)
	if r.Source != "dashboard" || r.Err != "" || len(r.Alive()) != 2 || !r.List[0].IsHead ||
		r.List[0].NodeIP != "192.168.200.12" || r.List[0].GPUs() != 1 || r.List[0].Resources["object_store_memory"] != 1<<30 {
		t.Errorf("dashboard: %+v", r)
	}
	if r := cluster.ParseRayNodes(ok(observed(t, "dashboard-nodes-truncated.json"), "wget"), true); !r.Partial || len(r.List) != 1 {
		t.Errorf("a truncated node table must say so: %+v", r)
	}
	r = cluster.ParseRayNodes(ok(observed(t, "ray-list-nodes.json"), "exec"), true)
	if r.Source != "cli" || len(r.List) != 3 || len(r.Alive()) != 2 || r.List[0].NodeIP != "10.1.230.180" ||
		r.List[2].StateMessage == "" || r.List[2].Resources["memory"] != 88583847116 {
		t.Errorf("ray list nodes: %+v", r)
	}
	if r := cluster.ParseRayNodes(ok("<html>oops</html>", "curl"), true); r.Err == "" {
		t.Errorf("a page that is no node table: %+v", r)
	}
	if r := cluster.ParseRayNodes(observe.HTTPResult{}, false); r.Source != "" || r.Err != "" || r.List != nil {
		t.Errorf("not probed: %+v", r)
	}
}
