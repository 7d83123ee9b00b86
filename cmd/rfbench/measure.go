//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// sample is one measured run of one case.
type sample struct {
	wall   time.Duration
	maxRSS int64 // bytes; the process's rusage Maxrss
	// conns and rts are SSH connections and round trips per host (the
	// largest over the hosts); -1 when not known.
	conns, rts int
}

// proc is a finished command.
type proc struct {
	sample
	stdout, stderr []byte
	exit           int
}

// inNetns runs argv in network namespace ns with env added, bounded by
// timeout, and measures it. ip netns exec and env exec the command in
// place, so the rusage is the command's own.
func inNetns(ctx context.Context, timeout time.Duration, ns string, env []string, argv ...string) (proc, error) {
	full := append([]string{"ip", "netns", "exec", ns, "env"}, env...)
	return measure(ctx, timeout, append(full, argv...)...)
}

// measure runs argv and reports its wall time, peak RSS and output. A
// non-zero exit is not an error (the caller decides); failing to start or a
// timeout is.
func measure(ctx context.Context, timeout time.Duration, argv ...string) (proc, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	p := proc{sample: sample{wall: time.Since(start), conns: -1, rts: -1}, stdout: out.Bytes(), stderr: errb.Bytes()}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			p.maxRSS = ru.Maxrss * 1024 // Linux reports KiB
		}
	}
	if ctx.Err() != nil {
		return p, fmt.Errorf("%s: %w after %s", argv[len(argv)-1], ctx.Err(), timeout)
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			p.exit = ee.ExitCode()
			return p, nil
		}
		return p, fmt.Errorf("%v: %w", argv, err)
	}
	return p, nil
}

// observedRE matches rayform's observation summary (plan and apply).
var observedRE = regexp.MustCompile(`Observed (\d+) hosts in \S+ \((\d+) SSH connections?, at most (\d+) round trips? per host\)`)

// parseObserved reads hosts, connections and round trips per host from
// rayform's "Observed N hosts in X (C SSH connections, at most R round
// trips per host)" line.
func parseObserved(out []byte) (hosts, conns, rts int, ok bool) {
	m := observedRE.FindSubmatch(out)
	if m == nil {
		return 0, 0, 0, false
	}
	hosts, _ = strconv.Atoi(string(m[1]))
	conns, _ = strconv.Atoi(string(m[2]))
	rts, _ = strconv.Atoi(string(m[3]))
	return hosts, conns, rts, true
}

// closedRE matches the transport's debug line when a connection closes.
var closedRE = regexp.MustCompile(`(?m)ssh: connection closed: host=(\S+) .*handshakes=(\d+) round_trips=(\d+)`)

// parseClosed sums, per host, the handshakes and round trips of the
// transport's "connection closed" debug lines (-log-level=debug), and
// returns the largest of each over the hosts and the number of hosts.
func parseClosed(log []byte) (hosts, conns, rts int) {
	type count struct{ hs, rt int }
	per := map[string]*count{}
	for _, m := range closedRE.FindAllSubmatch(log, -1) {
		c := per[string(m[1])]
		if c == nil {
			c = &count{}
			per[string(m[1])] = c
		}
		hs, _ := strconv.Atoi(string(m[2]))
		rt, _ := strconv.Atoi(string(m[3]))
		c.hs += hs
		c.rt += rt
	}
	for _, c := range per {
		conns = max(conns, c.hs)
		rts = max(rts, c.rt)
	}
	return len(per), conns, rts
}

// tail returns the last n bytes of b, for error messages.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}
