package ibdev

import (
	"bytes"
	"context"
	"flag"
	"testing"

	"github.com/rayform/rayform/cmd/simnode/internal/golden"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The hardware file binds one port to lo (always present, operstate
// "unknown", which ibdev2netdev shows as Up) and one to a netdev that does
// not exist (Down).
func TestIbdev2netdev(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"ports", nil, 0},
		{"verbose", []string{"-v"}, 0},
		{"bad-option", []string{"--foo"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &sim.Proc{Args: tt.args, Env: sim.Env{"SIMNODE_HARDWARE": golden.Path("hardware", "gb10.json")}, Stdout: &out, Stderr: &out}
			if code := Main(context.Background(), p); code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			golden.Check(t, *update, "ibdev2netdev/"+tt.name+".golden", out.String())
		})
	}
}

func TestNoHardwareMeansNoAdapters(t *testing.T) {
	var out bytes.Buffer
	p := &sim.Proc{Env: sim.Env{"SIMNODE_HARDWARE": golden.Path("hardware", "absent.json")}, Stdout: &out, Stderr: &out}
	if code := Main(context.Background(), p); code != 0 || out.Len() != 0 {
		t.Errorf("exit %d, output %q; want 0 and nothing", code, out.String())
	}
}
