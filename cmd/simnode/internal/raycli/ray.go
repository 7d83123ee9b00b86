// Package raycli plays Ray's `ray` command: start (head and worker, with
// the real IP auto-detection, daemonized or --block), stop, status, list
// nodes and health-check, with click's argument handling and Ray's output.
//
// Fast mode only: this is part of simnode's model of Ray, which the lab
// runs with `lab up -ray simnode` (lab up's default, `make demo
// RAY=simnode`, and the end-to-end tests whose subject is not Ray). No
// end-to-end test of Ray's behaviour uses it: those run the real Ray 2.53.0
// (`-ray real`).
package raycli

import (
	"context"
	"fmt"

	"github.com/rayform/rayform/cmd/simnode/internal/click"
	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// Main runs `ray ARGS...` and returns the exit status.
func Main(ctx context.Context, p *sim.Proc) int {
	g := group()
	if len(p.Args) > 0 && p.Args[0] == "--version" {
		fmt.Fprintf(p.Stdout, "ray, version %s\n", gcs.RayVersion)
		return 0
	}
	name, rest, help, uerr := g.Split(p.Args)
	if uerr != nil {
		fmt.Fprint(p.Stderr, uerr.Format())
		return 2
	}
	if help {
		fmt.Fprint(p.Stdout, g.HelpText())
		return 0
	}
	if name == "" {
		// click >= 8.2: a group without a command prints its help and
		// exits 2 (NoArgsIsHelpError).
		fmt.Fprint(p.Stderr, g.HelpText())
		return 2
	}
	var cmd *click.Command
	var run func(context.Context, *sim.Proc, *click.Values) int
	switch name {
	case "start":
		cmd, run = startCommand(), start
	case "stop":
		cmd, run = stopCommand(), stop
	case "status":
		cmd, run = statusCommand(), status
	case "list":
		cmd, run = listCommand(), list
	case "health-check":
		cmd, run = healthCheckCommand(), healthCheck
	default:
		fmt.Fprintf(p.Stderr, "simnode: `ray %s` is not simulated\n", name)
		return 1
	}
	v, err := cmd.Parse(rest)
	if err != nil {
		fmt.Fprint(p.Stderr, err.Format())
		return 2
	}
	if v.Help {
		fmt.Fprint(p.Stdout, cmd.HelpText())
		return 0
	}
	return run(ctx, p, v)
}
