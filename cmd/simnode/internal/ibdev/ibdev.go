// Package ibdev plays Mellanox OFED's ibdev2netdev: one line per RDMA port
// of the simulated hardware, "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)", with
// Up/Down read from the real netdev's operational state in the current
// network namespace.
package ibdev

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/netx"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// Main runs ibdev2netdev [-v].
func Main(ctx context.Context, p *sim.Proc) int {
	verbose := false
	for _, a := range p.Args {
		switch a {
		case "-v":
			verbose = true
		default:
			fmt.Fprintf(p.Stdout, "Usage: %s [-v]\n", filepath.Base("ibdev2netdev"))
			fmt.Fprintln(p.Stdout, "\t-v: verbose")
			return 1
		}
	}
	h, err := hw.Load(p.Env)
	if errors.Is(err, hw.ErrNoDriver) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(p.Stderr, err)
		return 1
	}
	for _, r := range h.RDMA {
		state := "Down"
		if st, ok := netx.Operstate(r.Netdev); ok && (st == "up" || st == "unknown") {
			state = "Up"
		}
		if verbose {
			active := "DOWN"
			if state == "Up" {
				active = "ACTIVE"
			}
			fmt.Fprintf(p.Stdout, "%s (MT4129 - MCX75310AAS-NEAT) NVIDIA ConnectX-7 fw 28.45.1200 port %d (%s) ==> %s (%s)\n", r.HCA, r.Port, active, r.Netdev, state)
			continue
		}
		fmt.Fprintf(p.Stdout, "%s port %d ==> %s (%s)\n", r.HCA, r.Port, r.Netdev, state)
	}
	return 0
}
