package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/run"
)

// unlockArgs are rayform force-unlock's arguments, parsed.
type unlockArgs struct {
	run   runOptions
	force bool
	// resource names the locked resource: its name or its address.
	resource string
}

// parseUnlockArgs parses rayform force-unlock's arguments; ok false when
// parsing ended the command (with code).
func parseUnlockArgs(c *cli, args []string) (a unlockArgs, code int, ok bool) {
	fs := newFlagSet(c, "force-unlock", "force-unlock [options] CLUSTER\n\n  Show who holds the lock of ray_cluster.CLUSTER on its head host and, after\n  confirmation, stop that holder so the lock is free. Only for a holder you know\n  is gone: a holder that vanished loses the lock by itself when its lease\n  expires.")
	a.run.register(fs)
	fs.BoolVar(&a.force, "force", false, "do not ask for confirmation")
	if code, ok := parseFlags(fs, args); !ok {
		return a, code, false
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(c.stderr, "Error: force-unlock takes one argument, the ray_cluster's name")
		return a, exitError, false
	}
	a.resource = fs.Arg(0)
	return a, exitOK, true
}

func runForceUnlock(ctx context.Context, c *cli, args []string) int {
	a, code, ok := parseUnlockArgs(c, args)
	if !ok {
		return code
	}
	s, code := openSession(c, &a.run)
	if s == nil {
		return code
	}
	defer s.close()
	t, ok := s.run.FindLock(a.resource)
	if !ok {
		fmt.Fprintf(c.stderr, "Error: no %q with a lock in the configuration\n", a.resource)
		return exitError
	}
	h, err := s.run.InspectLock(ctx, t)
	switch {
	case err != nil:
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	case h.Legacy != nil:
		fmt.Fprintf(c.stderr, "Error: %s is not locked, but the lock name earlier rayform versions used for it is: the %v.\n\nforce-unlock does not break it: an earlier rayform that holds it does not say for which deployment, and that name can be another's (project %q and cluster %q joined by '-' can give the same name as others). A holder that vanished loses it %s after its last renewal.\n",
			t.Resource, strings.TrimPrefix(h.Legacy.Error(), "lock "), s.project, t.Key, lock.DefaultLease)
		return exitError
	case h.Held == nil:
		fmt.Fprintf(c.stdout, "%s is not locked.\n", t.Resource)
		return endOrphans(ctx, c, s, t)
	}
	fmt.Fprintf(c.stdout, "The %v.\n", strings.TrimPrefix(h.Held.Error(), "lock "))
	if !a.force {
		fmt.Fprintf(c.stdout, "\nDo you really want to force-unlock?\n  rayform will stop that holder and free the lock. If it is still working, two\n  rayform runs may then change %s at once.\n  Only 'yes' will be accepted to confirm.\n\n  Enter a value: ", t.Resource)
		line, _ := bufio.NewReader(c.stdin).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			fmt.Fprintln(c.stderr, "\nforce-unlock cancelled.")
			return exitError
		}
	}
	if err := s.run.BreakLock(ctx, h); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	fmt.Fprintf(c.stdout, "\nThe lock of %s has been released. Other rayform commands may now take it.\n", t.Resource)
	return endOrphans(ctx, c, s, t)
}

// endOrphans ends, on every host, what an earlier run left running under
// t's fence (run.Runner.EndOrphans), saying what it ended where. That it
// cannot is a warning: the lock is free, and the next run fences the
// hosts.
func endOrphans(ctx context.Context, c *cli, s *session, t run.LockTarget) int {
	err := s.run.EndOrphans(ctx, t, func(host, name string, gen uint64, ended []lock.Ended) {
		fmt.Fprint(c.stderr, orphansMessage(host, name, gen, ended))
	})
	if err != nil {
		fmt.Fprintf(c.stderr, "Warning: %v\n", err)
	}
	return exitOK
}
