package pylog

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/golden"
)

// The fixture holds the sample of vLLM's weight loading bar quoted in
// ray-vllm-facts.md §3.6 (weight_utils.py _BAR_FORMAT); the elapsed times
// are those the sample's rates imply.
func TestWeightsProgressMatchesReference(t *testing.T) {
	b, err := os.ReadFile(golden.Path("pylog", "weights-progress.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(b)), "\n")
	got := []string{
		WeightsProgress("Loading safetensors checkpoint shards", 0, 14, 0),
		WeightsProgress("Loading safetensors checkpoint shards", 1, 14, 4380*time.Millisecond),
		WeightsProgress("Loading safetensors checkpoint shards", 3, 14, 12060*time.Millisecond),
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\ngot  %q\nwant %q", i, got[i], want[i])
		}
	}
}

func TestLineFormats(t *testing.T) {
	ts := time.Date(2026, 11, 29, 23, 22, 25, 585741812, time.UTC)
	tests := []struct {
		name, got, want string
	}{
		// real-outputs.md, c10d lines.
		{"glog", Glog(ts, 'W', "socket.cpp:764", "[c10d] x"), "[W1129 23:22:25.585741812 socket.cpp:764] [c10d] x"},
		// ray-vllm-facts.md §3.1 (record style).
		{"ray record", RayRecord(time.Date(2025, 11, 7, 5, 43, 8, 810e6, time.UTC), "INFO", "scripts.py:1152", "Local node IP: 143.248.188.94"), "2025-11-07 05:43:08,810\tINFO scripts.py:1152 -- Local node IP: 143.248.188.94"},
		// ray-vllm-facts.md §3.1 (C++ logger).
		{"ray cpp", RayCpp(time.Date(2025, 11, 7, 5, 43, 8, 926e6, time.UTC), 'W', 11, 11, "global_state_accessor.cc:435", "Retrying"), "[2025-11-07 05:43:08,926 W 11 11] global_state_accessor.cc:435: Retrying"},
		// ray-vllm-facts.md §3.6 newer prefixes.
		{"vllm", VLLM(time.Date(2026, 4, 20, 20, 13, 51, 0, time.UTC), "INFO", "kv_cache_utils.py:1319", "GPU KV cache size: 12,624 tokens"), "INFO 04-20 20:13:51 [kv_cache_utils.py:1319] GPU KV cache size: 12,624 tokens"},
		// real-outputs.md NCCL lines.
		{"nccl info", NCCL(ts, "vm", 815, 0, "INFO", "", "Bootstrap: Using enp1s0f1np1:192.168.200.12<0>"), "vm:815:815 [0] NCCL INFO Bootstrap: Using enp1s0f1np1:192.168.200.12<0>"},
		{"nccl warn", NCCL(time.Date(2026, 11, 29, 23, 22, 58, 0, time.UTC), "vm", 1004, 0, "WARN", "bootstrap.cc:114", "Bootstrap : no socket interface found"), "[2026-11-29 23:22:58] vm:1004:1004 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found"},
		// ray-vllm-facts.md §3.2 and §3.3.
		{"status memory", RayStatusMemory(57.74 * (1 << 30)), "57.74GiB"},
		{"status zero", RayStatusMemory(0), "0B"},
		{"state memory", RayStateMemory(2 * (1 << 30)), "2.000 GiB"},
		// Python reprs vLLM prints (ray_utils.py specs).
		{"repr", Repr(KV{{"GPU", 1.0}, {"node:10.1.230.180", 0.001}}), "{'GPU': 1.0, 'node:10.1.230.180': 0.001}"},
		{"bar", Bar("Capturing CUDA graphs (decode, FULL)", 35, 35, 1330*time.Millisecond), "Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:01<00:00, 26.32it/s]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got  %q\nwant %q", tt.got, tt.want)
			}
		})
	}
}
