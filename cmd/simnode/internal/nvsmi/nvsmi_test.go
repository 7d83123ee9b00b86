package nvsmi

import (
	"bytes"
	"context"
	"flag"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/golden"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestNvidiaSMI(t *testing.T) {
	tests := []struct {
		name     string
		hardware string // file under testdata/simnode/hardware, "" for none
		args     []string
		code     int
	}{
		// real-outputs.md: two H200s.
		{"h200-query", "h200x2.json", []string{"--query-gpu=index,name,memory.total,memory.used,memory.free,driver_version", "--format=csv"}, 0},
		{"h200-query-noheader-nounits", "h200x2.json", []string{"--query-gpu=name,memory.total,memory.free", "--format=csv,noheader,nounits"}, 0},
		// ray-vllm-facts.md §3.8: GB10 memory fields are [N/A].
		{"gb10-query", "gb10.json", []string{"--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"}, 0},
		{"gb10-list", "gb10.json", []string{"-L"}, 0},
		{"unknown-field", "gb10.json", []string{"--query-gpu=name,memory.totl", "--format=csv"}, 2},
		{"unknown-option", "gb10.json", []string{"--bogus"}, 2},
		{"missing-format", "gb10.json", []string{"--query-gpu=name"}, 2},
		{"no-driver", "", []string{"--query-gpu=name", "--format=csv"}, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := sim.Env{"SIMNODE_HARDWARE": golden.Path("hardware", "absent.json"), "SIMNODE_STATE_DIR": t.TempDir()}
			if tt.hardware != "" {
				env["SIMNODE_HARDWARE"] = golden.Path("hardware", tt.hardware)
			}
			var out, errb bytes.Buffer
			p := &sim.Proc{Args: tt.args, Env: env, Stdout: &out, Stderr: &errb, Now: func() time.Time { return time.Date(2026, 11, 29, 23, 22, 25, 0, time.UTC) }}
			if code := Main(context.Background(), p); code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errb.String())
			}
			golden.Check(t, *update, "nvidia-smi/"+tt.name+".golden", out.String())
		})
	}
}
