//go:build linux

// Command rfbench measures rayform against the time physics allows and
// against Ansible, on the lab (rflab), and prints a markdown table.
//
// For every node count N and management delay D it brings up a lab of N
// simulated GPU hosts, writes a configuration of one Ray cluster over all of
// them (one node block with for_each), converges it with `rayform apply
// -auto-approve`, and then measures, interleaved, for several repetitions:
//
//   - floor: OpenSSH ssh to every host in parallel, a fresh connection each,
//     running the probe script rayform runs on that host
//     (observe.ProbeScript), with the key exchange, host key algorithm and
//     cipher that rayform's SSH transport negotiates with the lab's sshd;
//   - plan: `rayform plan` on the converged cluster (no changes);
//   - ansible setup: `ansible all -m setup`, forks = N;
//   - ansible check: `ansible-playbook --check` of a playbook that inspects
//     what plan inspects (GPUs, routes to the peers, the image, the
//     container, Ray's node table, vLLM's health);
//   - apply (no-op): `rayform apply -auto-approve` on the converged cluster;
//   - apply from nothing: destroy, then apply, minus the simulator's own
//     model-load time (rayform's overhead).
//
// Every command runs in the lab's client namespace (ip netns exec), the only
// one with a route to the nodes. Wall time is measured around the process;
// peak RSS is the process's rusage Maxrss; SSH connections and round trips
// per host come from rayform's own counters (plan's "Observed" line, the
// transport's debug log for apply).
//
// rfbench needs root, the lab's prerequisites (sshd, docker.io), and
// Debian's ansible package for the Ansible cases (-ansible=false skips them).
//
//	go run ./cmd/rfbench -nodes 2,8,32 -delays 0,20ms -reps 5 -out bench.md
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// realMain dispatches the internal helpers (run inside a lab namespace by
// rfbench itself) and otherwise runs the benchmark.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case internalFloor:
			return runFloorHelper(ctx, args[1:], stdout, stderr)
		case internalKex:
			return runKexHelper(ctx, args[1:], stdout, stderr)
		}
	}
	opts, err := parseOptions(args, stderr)
	if err != nil {
		if err == errHelp {
			return 0
		}
		fmt.Fprintf(stderr, "rfbench: %v\n", err)
		return 2
	}
	b := &bench{opts: opts, stdout: stdout, stderr: stderr}
	if err := b.run(ctx); err != nil {
		fmt.Fprintf(stderr, "rfbench: %v\n", err)
		return 1
	}
	return 0
}
