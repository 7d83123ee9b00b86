package hw

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(sim.Env{EnvHardware: filepath.Join(dir, "absent.json")}); !errors.Is(err, ErrNoDriver) {
		t.Errorf("missing file: err = %v, want ErrNoDriver", err)
	}
	p := filepath.Join(dir, "hw.json")
	if err := os.WriteFile(p, []byte(`{"gpus":[{"name":"NVIDIA GB10","memory_mib":0}],"memory_mib":122572,"unified_memory":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := Load(sim.Env{EnvHardware: p})
	if err != nil {
		t.Fatal(err)
	}
	if h.DeviceTotalMiB(0) != 122572 || !h.Unified(0) || h.BaseUsed() != 5684 || h.GPUs[0].ComputeCap != "12.1" || h.DriverVersion != "580.95.05" {
		t.Errorf("defaults not applied: %+v", h)
	}
	if err := os.WriteFile(p, []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(sim.Env{EnvHardware: p}); err == nil || errors.Is(err, ErrNoDriver) {
		t.Errorf("bad JSON: err = %v", err)
	}
}

// Precedence: default < hardware file < SIMNODE_<KEY>.
func TestTimingPrecedence(t *testing.T) {
	h := &Hardware{Timing: map[string]string{"weight_load": "2s", "graph_capture": "1s"}}
	tm, err := LoadTiming(h, sim.Env{"SIMNODE_GRAPH_CAPTURE": "300ms", "SIMNODE_TOKENS_PER_SECOND": "500"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key  string
		want time.Duration
	}{
		{"weight_load", 2 * time.Second},
		{"graph_capture", 300 * time.Millisecond},
		{"c10d_timeout", 600 * time.Second},
		{"placement_group_timeout", 1800 * time.Second},
	}
	for _, tt := range tests {
		if got := tm.Get(tt.key); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.key, got, tt.want)
		}
	}
	if tm.TokensPerSecond != 500 {
		t.Errorf("tokens per second %v", tm.TokensPerSecond)
	}
	back, err := TimingFromMap(tm.Map())
	if err != nil || back.Get("graph_capture") != 300*time.Millisecond || back.TokensPerSecond != 500 {
		t.Errorf("round trip: %v %v", back, err)
	}
	for _, bad := range []map[string]string{{"weight_lod": "1s"}, {"weight_load": "soon"}} {
		if _, err := LoadTiming(&Hardware{Timing: bad}, sim.Env{}); err == nil {
			t.Errorf("timing %v accepted", bad)
		}
	}
}

func TestLookupModel(t *testing.T) {
	h := &Hardware{Models: map[string]Model{"me/tiny": {WeightsGiB: 1, Shards: 1}}}
	if m := h.LookupModel("Qwen/Qwen3.5-122B-A10B-FP8"); m.Shards != 39 {
		t.Errorf("seed model shards = %d, want 39", m.Shards)
	}
	if m := h.LookupModel("me/tiny"); m.Architecture == "" || m.MaxModelLen == 0 {
		t.Errorf("file model not filled: %+v", m)
	}
	if m := h.LookupModel("acme/Foo-8B-FP8"); m.WeightsGiB < 7 || m.WeightsGiB > 8 {
		t.Errorf("estimated weights %v GiB for 8B FP8", m.WeightsGiB)
	}
}
