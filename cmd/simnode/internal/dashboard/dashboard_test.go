package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
)

type fixed struct{ st gcs.Status }

func (f fixed) Status() *gcs.Status { s := f.st; return &s }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Endpoints and envelopes of ray-vllm-facts.md §3.4.
func TestDashboard(t *testing.T) {
	src := fixed{gcs.Status{SessionName: "session_x", Nodes: []gcs.NodeInfo{
		{NodeID: "aa", NodeIP: "192.168.200.12", NodeName: "192.168.200.12", IsHead: true, State: gcs.Alive, Resources: map[string]float64{"GPU": 1, "memory": 1 << 30}},
		{NodeID: "bb", NodeIP: "192.168.200.13", NodeName: "192.168.200.13", State: gcs.Dead, Resources: map[string]float64{"GPU": 1}},
	}}}
	srv := httptest.NewServer(Handler(src, time.Now, Auth{Mode: "disabled"}))
	defer srv.Close()
	if code, body := get(t, srv.URL+"/api/gcs_healthz"); code != 200 || body != "success" {
		t.Errorf("gcs_healthz = %d %q", code, body)
	}
	if _, body := get(t, srv.URL+"/api/version"); body != `{"version": "4", "ray_version": "2.53.0", "ray_commit": "7f5e2f5a2b1d6c3e9f0a8b7c6d5e4f3a2b1c0d9e", "session_name": "session_x"}` {
		t.Errorf("version = %s", body)
	}
	_, body := get(t, srv.URL+"/api/v0/nodes?limit=100&detail=false&filter_keys=state&filter_predicates==&filter_values=ALIVE")
	var env struct {
		Result bool `json:"result"`
		Data   struct {
			Result struct {
				Total  int `json:"total"`
				Result []struct {
					NodeIP    string         `json:"node_ip"`
					IsHead    bool           `json:"is_head_node"`
					Resources map[string]any `json:"resources_total"`
				} `json:"result"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	r := env.Data.Result
	if !env.Result || r.Total != 2 || len(r.Result) != 1 || r.Result[0].NodeIP != "192.168.200.12" || !r.Result[0].IsHead || r.Result[0].Resources["memory"] != "1.000 GiB" {
		t.Errorf("nodes envelope = %s", body)
	}
}

// TestClusterStatusUsage: /api/cluster_status (format 0) carries the
// monitor's report as Ray 2.53's dashboard returns it (its answer in the
// lab: testdata/observe/ray-2.53-cluster-status-tp2.json), keys in camel
// case: per node ID, each resource as [used, total], a placement group's
// reserved GPUs used (issue 33 item 1: rayform's GPU budget reads them);
// a dead node is left out.
func TestClusterStatusUsage(t *testing.T) {
	src := fixed{gcs.Status{SessionName: "session_x", Nodes: []gcs.NodeInfo{
		{NodeID: "aa", NodeIP: "192.168.200.12", IsHead: true, State: gcs.Alive,
			Resources: map[string]float64{"GPU": 2, "CPU": 20, "object_store_memory": 1 << 30, "node:__internal_head__": 1, "node:192.168.200.12": 1},
			Available: map[string]float64{"GPU": 0, "CPU": 20, "object_store_memory": 1 << 30, "node:__internal_head__": 1, "node:192.168.200.12": 1}},
		{NodeID: "bb", NodeIP: "192.168.200.13", State: gcs.Alive, Resources: map[string]float64{"GPU": 2, "node:192.168.200.13": 1}, Available: map[string]float64{"GPU": 2, "node:192.168.200.13": 1}},
		{NodeID: "cc", NodeIP: "192.168.200.14", State: gcs.Dead, Resources: map[string]float64{"GPU": 2}},
	}}}
	srv := httptest.NewServer(Handler(src, time.Now, Auth{Mode: "disabled"}))
	defer srv.Close()
	_, body := get(t, srv.URL+"/api/cluster_status")
	var env struct {
		Result bool `json:"result"`
		Data   struct {
			ClusterStatus struct {
				LoadMetricsReport struct {
					Usage       map[string][]float64            `json:"usage"`
					UsageByNode map[string]map[string][]float64 `json:"usageByNode"`
				} `json:"loadMetricsReport"`
				MonitorPid int `json:"monitorPid"`
			} `json:"clusterStatus"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil || !env.Result {
		t.Fatalf("%v: %s", err, body)
	}
	r := env.Data.ClusterStatus.LoadMetricsReport
	want := map[string]map[string][]float64{
		"aa": {"GPU": {2, 2}, "CPU": {0, 20}, "objectStoreMemory": {0, 1 << 30}, "node:InternalHead": {0, 1}, "node:192.168.200.12": {0, 1}},
		"bb": {"GPU": {0, 2}, "node:192.168.200.13": {0, 1}},
	}
	got, _ := json.Marshal(r.UsageByNode)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("usageByNode = %s, want %s", got, exp)
	}
	if g := r.Usage["GPU"]; len(g) != 2 || g[0] != 2 || g[1] != 4 {
		t.Errorf("usage GPU = %v, want [2 4]", g)
	}
}
