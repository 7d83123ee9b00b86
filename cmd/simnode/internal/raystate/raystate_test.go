package raystate

import (
	"flag"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/golden"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
)

var update = flag.Bool("update", false, "rewrite golden files")

// twoNodes is the seed's cluster after the fix: both nodes on the fabric,
// one GB10 each, the worker then lost.
func twoNodes() *gcs.Status {
	head := gcs.NodeInfo{
		NodeID: "64852f2192a81fd851f1aa6571b6025e3ff2a6019eabb9508a920ca4", NodeIP: "192.168.200.12", NodeName: "192.168.200.12", IsHead: true, State: gcs.Alive,
		Resources:   map[string]float64{"node:__internal_head__": 1, "CPU": 20, "memory": 85829568512, "node:192.168.200.12": 1, "GPU": 1, "object_store_memory": 36784100966, "accelerator_type:GB10": 1},
		Available:   map[string]float64{"node:__internal_head__": 1, "CPU": 20, "memory": 85829568512, "node:192.168.200.12": 0.999, "GPU": 0, "object_store_memory": 36784100966, "accelerator_type:GB10": 1},
		Labels:      map[string]string{"ray.io/node-id": "64852f2192a81fd851f1aa6571b6025e3ff2a6019eabb9508a920ca4"},
		StartTimeMs: 1795998000000,
	}
	worker := gcs.NodeInfo{
		NodeID: "8cf660c15ce3e4f3167ca322a83a23bdef7d917cd80c3f3255d6c50a", NodeIP: "192.168.200.13", NodeName: "192.168.200.13", State: gcs.Alive,
		Resources:   map[string]float64{"CPU": 20, "memory": 85829568512, "node:192.168.200.13": 1, "GPU": 1, "object_store_memory": 36784100966, "accelerator_type:GB10": 1},
		Available:   map[string]float64{"CPU": 20, "memory": 85829568512, "node:192.168.200.13": 1, "GPU": 1, "object_store_memory": 36784100966, "accelerator_type:GB10": 1},
		Labels:      map[string]string{"ray.io/node-id": "8cf660c15ce3e4f3167ca322a83a23bdef7d917cd80c3f3255d6c50a"},
		StartTimeMs: 1795998005000,
	}
	return &gcs.Status{Nodes: []gcs.NodeInfo{head, worker}, PendingPGs: []gcs.PGPending{{Bundles: []map[string]float64{{"GPU": 1, "node:10.1.230.180": 0.001}, {"GPU": 1}}, Strategy: "PACK"}}}
}

// Formats pinned against ray-vllm-facts.md §3.2 (ray status) and §3.3 (ray
// list nodes: json, yaml --detail, table).
func TestRenderings(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 20, 0, 123456000, time.UTC)
	st := twoNodes()
	var rows, detail []pylog.KV
	for _, n := range st.Nodes {
		rows = append(rows, NodeRow(n, false))
		detail = append(detail, NodeRow(n, true))
	}
	tests := []struct{ name, got string }{
		{"status.golden", StatusText(now, st)},
		{"list-nodes.json.golden", JSON(rows) + "\n"},
		{"list-nodes-detail.yaml.golden", YAML(detail)},
		{"list-nodes.table.golden", Table(now, rows)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden.Check(t, *update, "ray/"+tt.name, tt.got)
		})
	}
}

func TestYAMLQuoting(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"2023-07-11 23:12:09.508000", "'2023-07-11 23:12:09.508000'"},
		{"34.758 GiB", "34.758 GiB"},
		{"1.0", "'1.0'"},
		{"true", "'true'"},
		{"ALIVE", "ALIVE"},
		{"", "''"},
	}
	for _, tt := range tests {
		if got := yamlScalar(tt.in); got != tt.want {
			t.Errorf("yamlScalar(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestFormatPG(t *testing.T) {
	got := FormatPG([]map[string]float64{{"GPU": 1, "node:10.1.230.180": 0.001}, {"GPU": 1}, {"GPU": 1}}, "PACK")
	want := "{'GPU': 1.0, 'node:10.1.230.180': 0.001} * 1, {'GPU': 1.0} * 2 (PACK)"
	if got != want {
		t.Errorf("FormatPG = %q, want %q", got, want)
	}
}
