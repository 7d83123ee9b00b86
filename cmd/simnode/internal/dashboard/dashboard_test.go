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
	srv := httptest.NewServer(Handler(src, time.Now))
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
