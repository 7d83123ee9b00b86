package nvsmi

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
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
		// rayform's probe query and --version, as on the real H100 of
		// testdata/observe/h100 (TestProbeQueryAsRealH100).
		{"h100-probe-query", "h100.json", []string{"--query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,compute_cap,mig.mode.current", "--format=csv,noheader,nounits"}, 0},
		{"h100-version", "h100.json", []string{"--version"}, 0},
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

// TestProbeQueryAsRealH100: the stand-in answers rayform's probe query as
// the real nvidia-smi did on an H100 (testdata/observe/h100/smi-query9.txt),
// every field but memory.free (the driver's reservation differs per GPU).
func TestProbeQueryAsRealH100(t *testing.T) {
	real, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "observe", "h100", "smi-query9.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.Split(string(real), "\n")[1], ", ")
	var out bytes.Buffer
	env := sim.Env{"SIMNODE_HARDWARE": golden.Path("hardware", "h100.json"), "SIMNODE_STATE_DIR": t.TempDir()}
	p := &sim.Proc{Args: []string{"--query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,compute_cap,mig.mode.current", "--format=csv,noheader,nounits"},
		Env: env, Stdout: &out, Stderr: &out, Now: time.Now}
	if code := Main(context.Background(), p); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	got := strings.Split(strings.TrimSpace(out.String()), ", ")
	if len(got) != len(want) {
		t.Fatalf("got %q, real %q", got, want)
	}
	for i := range want {
		if i != 5 && got[i] != want[i] {
			t.Errorf("field %d: %q, the real nvidia-smi printed %q", i, got[i], want[i])
		}
	}
}

// TestVersionAsRealH100MarkedSimulated: the stand-in's `nvidia-smi
// --version` is the real one's on an H100 (testdata/observe/h100/
// smi-version.txt), line for line, plus one last line the real tool does
// not print, "Simulated by : rayform simnode", by which rayform's probe
// (observe's GPUFacts.Simulator) and status tell a simulated GPU.
func TestVersionAsRealH100MarkedSimulated(t *testing.T) {
	real, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "observe", "h100", "smi-version.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(real), "\n"), "\n")
	want := strings.Join(lines[1:len(lines)-1], "\n") + "\n" // less "$ command" and "[exit 0]"
	if strings.Contains(want, SimulatedKey) {
		t.Fatalf("the real nvidia-smi printed %q: it cannot mark a simulation", SimulatedKey)
	}
	want += "Simulated by        : rayform simnode\n"
	var out bytes.Buffer
	env := sim.Env{"SIMNODE_HARDWARE": golden.Path("hardware", "h100.json"), "SIMNODE_STATE_DIR": t.TempDir()}
	p := &sim.Proc{Args: []string{"--version"}, Env: env, Stdout: &out, Stderr: &out, Now: time.Now}
	if code := Main(context.Background(), p); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if out.String() != want {
		t.Errorf("--version:\n%s\nwant the real one's lines and the marker:\n%s", out.String(), want)
	}
}
