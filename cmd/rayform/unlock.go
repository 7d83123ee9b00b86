package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/resources/cluster"
)

func runForceUnlock(ctx context.Context, c *cli, args []string) int {
	var opts runOptions
	fs := newFlagSet(c, "force-unlock", "force-unlock [options] CLUSTER\n\n  Show who holds the lock of ray_cluster.CLUSTER on its head host and, after\n  confirmation, stop that holder so the lock is free. Only for a holder you know\n  is gone: a holder that vanished loses the lock by itself when its lease\n  expires.")
	opts.register(fs)
	force := fs.Bool("force", false, "do not ask for confirmation")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(c.stderr, "Error: force-unlock takes one argument, the ray_cluster's name")
		return exitError
	}
	name := cluster.ClusterName(fs.Arg(0))
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	head := ""
	var nodes []string // the cluster's nodes, where its runs fence the lock
	if rc := s.cfg.RayClusters[name]; rc != nil {
		head, nodes = rc.Head, rc.Nodes()
	}
	if r, ok := s.st.Get(cluster.ClusterAddress(name)); ok {
		if head == "" {
			head = r.Head
		}
		for _, h := range r.Hosts {
			if !slices.Contains(nodes, h.Node) {
				nodes = append(nodes, h.Node)
			}
		}
	}
	if head == "" {
		fmt.Fprintf(c.stderr, "Error: no ray_cluster %q in the configuration\n", name)
		return exitError
	}
	conn, ok := s.conns[head]
	if !ok {
		fmt.Fprintf(c.stderr, "Error: no SSH settings for host %s\n", head)
		return exitError
	}
	lockName := lock.Name(s.project, name)
	err := lock.Inspect(ctx, conn, lockName)
	var held *lock.HeldError
	switch {
	case err == nil:
		// The name earlier versions used is never broken: two deployments
		// can share it ("hb-x" + "spark" and "hb" + "x-spark").
		if lerr := lock.Inspect(ctx, conn, lock.LegacyName(s.project, name)); errors.As(lerr, &held) && held.Identity == "" {
			fmt.Fprintf(c.stderr, "Error: ray_cluster.%s is not locked, but the lock name earlier rayform versions used for it is: the %v.\n\nforce-unlock does not break it: an earlier rayform that holds it does not say for which deployment, and that name can be another's (project %q and cluster %q joined by '-' can give the same name as others). A holder that vanished loses it %s after its last renewal.\n",
				name, strings.TrimPrefix(held.Error(), "lock "), s.project, name, lock.DefaultLease)
			return exitError
		}
		fmt.Fprintf(c.stdout, "ray_cluster.%s is not locked.\n", name)
		return endOrphans(ctx, c, s, name, lockName, head, nodes)
	case !errors.As(err, &held):
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	fmt.Fprintf(c.stdout, "The %v.\n", strings.TrimPrefix(held.Error(), "lock "))
	if !*force {
		fmt.Fprintf(c.stdout, "\nDo you really want to force-unlock?\n  rayform will stop that holder and free the lock. If it is still working, two\n  rayform runs may then change ray_cluster.%s at once.\n  Only 'yes' will be accepted to confirm.\n\n  Enter a value: ", name)
		line, _ := bufio.NewReader(c.stdin).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			fmt.Fprintln(c.stderr, "\nforce-unlock cancelled.")
			return exitError
		}
	}
	if err := lock.Break(ctx, conn, lockName, held.PID); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	// The same run holds the lock under the name earlier versions used
	// too: that one is broken only when its holder record names the same
	// run (the client's pid is part of it).
	var legacy *lock.HeldError
	if lerr := lock.Inspect(ctx, conn, lock.LegacyName(s.project, name)); errors.As(lerr, &legacy) && legacy.Holder == held.Holder && legacy.Identity == lockName {
		if err := lock.Break(ctx, conn, lock.LegacyName(s.project, name), legacy.PID); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
	}
	fmt.Fprintf(c.stdout, "\nThe lock of ray_cluster.%s has been released. Other rayform commands may now take it.\n", name)
	return endOrphans(ctx, c, s, name, lockName, head, nodes)
}

// endOrphans takes the free lock of ray_cluster name for a moment and
// advances its fence on each of the cluster's nodes, as a run does: that
// ends what an earlier run (killed, or cut off from a node) left running
// under the fence there, each named, so that the next apply does not wait
// for it, and refuses any later command of that run. A node that cannot be
// fenced is a warning: the next apply fences it.
func endOrphans(ctx context.Context, c *cli, s *session, name, lockName, head string, nodes []string) int {
	l, err := lock.Acquire(ctx, s.conns[head], lockName, lock.Options{Holder: run.Holder("force-unlock"), Identity: lockName})
	if err != nil {
		fmt.Fprintf(c.stderr, "Warning: could not take the lock of ray_cluster.%s to end what an earlier run left running on its nodes: %v\n", name, err)
		return exitOK
	}
	defer l.Release()
	for _, n := range nodes {
		conn, ok := s.conns[n]
		if !ok {
			continue
		}
		f, ended, err := lock.AdvanceFence(ctx, conn, lockName)
		if len(ended) > 0 {
			gen := uint64(0)
			if err == nil {
				gen = f.Gen - 1
			}
			fmt.Fprint(c.stderr, orphansMessage(n, lockName, gen, ended))
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "Warning: %v\n", err)
		}
	}
	return exitOK
}
