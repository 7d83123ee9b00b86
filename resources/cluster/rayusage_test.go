package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rayform/rayform/engine/observe"
)

// TestParseRayUsage reads the dashboard's /api/cluster_status as Ray 2.53
// answers it (the monitor's report, keys in camel case): GPUs free per
// node IP are total − used; an answer without a report, or none, says why.
func TestParseRayUsage(t *testing.T) {
	ok200 := func(body string) observe.HTTPResult {
		return observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Via: "curl", Body: body}
	}
	// The real Ray 2.53's answer in the lab, a serve of 2 GPUs running
	// (vLLM's placement group packed onto the head): keyed by node ID.
	real, err := os.ReadFile(filepath.Join("..", "..", "testdata", "observe", "ray-2.53-cluster-status-tp2.json"))
	if err != nil {
		t.Fatal(err)
	}
	// An older Ray keyed it by IP.
	byIP := `{"result": true, "msg": "Got cluster status.", "data": {"autoscalingStatus": null, "autoscalingError": null, "clusterStatus": {"loadMetricsReport": {"usageByNode": {"192.168.200.12": {"GPU": [1.0, 2.0]}, "192.168.200.13": {"GPU": [0.5, 2.0]}}}, "time": 1764790000.1, "monitorPid": 312}}}`
	cases := []struct {
		name   string
		r      observe.HTTPResult
		probed bool
		free   map[string]int // ip → free GPUs; -1: not in the report
		err    string
	}{
		{"Ray 2.53's report", ok200(string(real)), true, map[string]int{"192.168.200.12": 0, "192.168.200.13": 2, "192.168.200.14": -1}, ""},
		{"a report keyed by IP", ok200(byIP), true, map[string]int{"192.168.200.12": 1, "192.168.200.13": 1}, ""},
		{"no report yet", ok200(`{"result": true, "msg": "Got cluster status.", "data": {"autoscalingStatus": null, "autoscalingError": null, "clusterStatus": null}}`), true, map[string]int{"192.168.200.12": -1}, "Ray's monitor has not reported the nodes' usage yet"},
		{"dashboard error", ok200(`{"result": false, "msg": "boom", "data": {}}`), true, nil, "dashboard /api/cluster_status: boom"},
		{"refused", observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Refused: true, Err: "connection refused"}}, true, nil, "dashboard: connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := ParseRayUsage(c.r, true)
			if u.Probed != c.probed || u.Err != c.err {
				t.Errorf("probed %v err %q, want %v %q", u.Probed, u.Err, c.probed, c.err)
			}
			for ip, want := range c.free {
				got, ok := u.FreeGPUs(ip)
				if !ok {
					got = -1
				}
				if got != want {
					t.Errorf("FreeGPUs(%s) = %d, want %d", ip, got, want)
				}
			}
		})
	}
	if u := ParseRayUsage(observe.HTTPResult{}, false); u.Probed || u.Err != "" || u.ByIP != nil {
		t.Errorf("not probed: %+v", u)
	}
}
