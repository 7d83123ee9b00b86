package arguments

import (
	"strings"
	"time"

	"github.com/rayform/rayform/resources"
)

// Check is rayform check's command line.
type Check struct {
	*Run
	// Options are the check's: its timeout, buffer size, backends and
	// extra environment.
	Options resources.CheckOptions
	// Clusters are the clusters named (none: every one).
	Clusters []string
}

// ParseCheck parses rayform check's arguments.
func ParseCheck(args []string) (*Check, *ParseError) {
	o, p, json := newRun("check", "check [options] [CLUSTER...]\n\n"+
		"  Run the data-plane check on running Ray clusters (all, or the named ones):\n"+
		"  one torch process per node inside its Ray container, a c10d rendezvous on\n"+
		"  the head's fabric address, a Gloo and (with GPUs) an NCCL all_reduce. Prints\n"+
		"  the address and interface each backend used, the rendezvous time and the\n"+
		"  bus bandwidth next to the link speed; exits 1 when the data plane fails.\n"+
		"  Without CLUSTER, clusters with dataplane_check = false are left out.")
	a := &Check{Run: o}
	timeout := p.fs.Duration("timeout", resources.DefaultCheckTimeout, "bound on the rendezvous and on each collective")
	size := p.fs.Float64("size-mb", resources.DefaultCheckSizeMiB, "all_reduce buffer in `MiB`")
	backends := p.fs.String("backends", "auto", "`LIST` of gloo, nccl; auto = gloo, plus nccl where CUDA is available")
	var env stringList
	p.fs.Var(&env, "env", "add `NAME=VALUE` to the check's environment over the container's (try a setting, e.g. NCCL_IB_HCA, before pinning it; repeatable)")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	if err != nil {
		return a, err
	}
	a.Options = resources.CheckOptions{Timeout: *timeout, SizeMiB: *size, Backends: *backends, Env: map[string]string{}}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return a, p.errorf("-env %q: want NAME=VALUE", kv)
		}
		a.Options.Env[k] = v
	}
	a.Clusters = p.fs.Args()
	return a, nil
}

// Unlock is rayform force-unlock's command line.
type Unlock struct {
	*Run
	// Force skips the confirmation.
	Force bool
	// Resource names the locked resource: its name or its address.
	Resource string
}

// ParseUnlock parses rayform force-unlock's arguments.
func ParseUnlock(args []string) (*Unlock, *ParseError) {
	o, p, json := newRun("force-unlock", "force-unlock [options] CLUSTER\n\n  Show who holds the lock of ray_cluster.CLUSTER on its head host and, after\n  confirmation, stop that holder so the lock is free. Only for a holder you know\n  is gone: a holder that vanished loses the lock by itself when its lease\n  expires.")
	a := &Unlock{Run: o}
	p.fs.BoolVar(&a.Force, "force", false, "do not ask for confirmation")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case p.fs.NArg() != 1:
		return a, p.errorf("force-unlock takes one argument, the ray_cluster's name")
	}
	a.Resource = p.fs.Arg(0)
	return a, nil
}

// Logs is rayform logs' command line.
type Logs struct {
	*Run
	// Query is the logs asked for: the address, the node, -f, -tail,
	// -since and -previous (the caller adds the configuration and the
	// project).
	Query resources.LogQuery
}

// ParseLogs parses rayform logs' arguments.
func ParseLogs(args []string) (*Logs, *ParseError) {
	o, p, json := newRun("logs", "logs [options] ADDRESS\n\n  Print the logs of ADDRESS, each line prefixed by its node: for a vllm_serve,\n  the vllm serve log on its head; for a ray_cluster, its containers' logs\n  (docker logs) on every node. -f follows them until Ctrl-C.")
	a := &Logs{Run: o}
	q := &a.Query
	p.fs.StringVar(&q.Node, "node", "", "only the logs of node `NAME`")
	p.fs.BoolVar(&q.Follow, "f", false, "follow the logs as they grow, until interrupted")
	p.fs.IntVar(&q.Tail, "tail", 100, "print the last `N` lines of each log first (-1: all)")
	p.fs.BoolVar(&q.Previous, "previous", false, "vllm_serve only: the log of the serve's previous process (a failed or replaced start), which the next start keeps")
	p.fs.StringVar(&q.Since, "since", "", "ray_cluster only: logs since `D`, a duration (10m) or a timestamp (2026-12-01T10:00:00Z), as docker logs --since takes")
	pos, err := p.parseInterspersed(args)
	o.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case len(pos) != 1:
		return a, p.errorf("logs takes one argument, a resource address (%s)", strings.TrimPrefix(resources.LogAddresses(), "a "))
	}
	q.Address = pos[0]
	return a, nil
}

// Status is rayform status' command line.
type Status struct {
	*Run
	// Watch, when positive, refreshes the terminal every Watch.
	Watch time.Duration
}

// ParseStatus parses rayform status' arguments.
func ParseStatus(args []string) (*Status, *ParseError) {
	o, p, json := newRun("status", "status [options]\n\n  Observe the hosts once (read-only) and show nodes, containers, Ray's node\n  table and each serve's health, model, uptime, requests and tokens. Exits 0\n  when everything is healthy and as configured, 2 when not, 1 on error.")
	a := &Status{Run: o}
	p.fs.DurationVar(&a.Watch, "watch", 0, "on a terminal, refresh every `D` (e.g. 5s) until interrupted")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case p.fs.NArg() > 0:
		return a, p.errorf("status takes no arguments (got %q)", p.fs.Args())
	}
	return a, nil
}
