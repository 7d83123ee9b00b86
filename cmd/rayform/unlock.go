package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/lock"
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
	name := strings.TrimPrefix(fs.Arg(0), "ray_cluster.")
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	rc := s.cfg.RayClusters[name]
	if rc == nil {
		fmt.Fprintf(c.stderr, "Error: no ray_cluster %q in the configuration\n", name)
		return exitError
	}
	conn, ok := s.conns[rc.Head]
	if !ok {
		fmt.Fprintf(c.stderr, "Error: no SSH settings for host %s\n", rc.Head)
		return exitError
	}
	err := lock.Inspect(ctx, conn, lockName(s.project, name))
	var held *lock.HeldError
	switch {
	case err == nil:
		fmt.Fprintf(c.stdout, "ray_cluster.%s is not locked.\n", name)
		return exitOK
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
	if err := lock.Break(ctx, conn, lockName(s.project, name), held.PID); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	fmt.Fprintf(c.stdout, "\nThe lock of ray_cluster.%s has been released. Other rayform commands may now take it.\n", name)
	return exitOK
}
