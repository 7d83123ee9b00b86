package raycli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/click"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// stopKillWait is how long `ray stop` waits for the processes it had to
// SIGKILL after a bucket's grace period (ray 2.53.0,
// ray/scripts/scripts.py, kill_procs: `psutil.wait_procs(alive,
// timeout=2)`).
const stopKillWait = 2 * time.Second

// rayProc is one process `ray stop` found: its pid and its start time
// (field 22 of /proc/PID/stat), so that a pid reused by another process is
// never signalled (psutil checks the same before kill and terminate).
type rayProc struct {
	pid   int
	start string
}

// procStat returns a process's state letter and start time from
// /proc/PID/stat; ok is false when the pid does not exist.
func procStat(pid int) (state byte, start string, parent int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", 0, false
	}
	// After "comm)": state, ppid, pgrp, ... starttime is field 22 of the
	// line, the 20th after comm.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, "", 0, false
	}
	pp, _ := strconv.Atoi(f[1])
	return f[0][0], f[19], pp, true
}

// rayProcesses finds this node's simulated Ray processes: daemons whose
// config lives under root, and their worker children. Like `ray stop`, it
// scans the process table; matching on the temp root keeps nodes that share
// a PID namespace (tests) apart, where the real `ray stop` would stop every
// Ray process of the host.
func rayProcesses(root string) (daemons, workers []rayProc) {
	ents, _ := os.ReadDir("/proc")
	type entry struct {
		p      rayProc
		parent int
	}
	var others []entry
	daemonPids := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		_, start, parent, ok := procStat(pid)
		if !ok {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
		if len(args) >= 3 && args[1] == DaemonCommand && strings.HasPrefix(args[2], root+string(os.PathSeparator)) {
			daemons = append(daemons, rayProc{pid, start})
			daemonPids[pid] = true
			continue
		}
		others = append(others, entry{rayProc{pid, start}, parent})
	}
	for _, o := range others {
		if daemonPids[o.parent] {
			workers = append(workers, o.p)
		}
	}
	return daemons, workers
}

// gone reports whether a process `ray stop` signalled has ended: its pid no
// longer exists (or now names another process), or it is a zombie none of
// whose threads still runs. psutil.wait_procs, which the real `ray stop`
// uses, waits for the pid to disappear; a Ray daemon's parent is the host's
// PID 1, which may reap it late (the lab host's reaps an orphan ~1.7 s after
// it exits), and a zombie whose threads have all exited holds nothing (no
// socket, no memory), so it counts as stopped. A zombie thread-group leader
// whose other threads are still exiting does not: it still holds the
// process's files, among them the GCS's listening socket; reading the state
// letter alone ("Z") let `ray stop` return while the port was still bound,
// and the next `ray start --head` failed to bind it.
func (p rayProc) gone() bool {
	state, start, _, ok := procStat(p.pid)
	if !ok || start != p.start {
		return true
	}
	if state != 'Z' {
		return false
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(p.pid) + "/task")
	return err != nil || len(tasks) <= 1
}

// signal sends sig unless the process is gone; false when it was.
func (p rayProc) signal(sig syscall.Signal) bool {
	if p.gone() {
		return false
	}
	return !errors.Is(syscall.Kill(p.pid, sig), syscall.ESRCH)
}

// waitGone is psutil.wait_procs: it polls procs until each is gone or the
// timeout passes (psutil's interval: 0.1 ms, doubling, at most 40 ms) and
// returns those gone and those still alive.
func waitGone(ctx context.Context, procs []rayProc, timeout time.Duration) (stopped, alive []rayProc) {
	deadline := time.Now().Add(timeout)
	interval := 100 * time.Microsecond
	alive = procs
	for {
		var still []rayProc
		for _, p := range alive {
			if p.gone() {
				stopped = append(stopped, p)
			} else {
				still = append(still, p)
			}
		}
		alive = still
		if len(alive) == 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			return stopped, alive
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		interval = min(interval*2, 40*time.Millisecond)
	}
}

// stop is `ray stop` (ray 2.53.0, ray/scripts/scripts.py, stop and its
// kill_procs): the processes go in buckets, in order — the raylet first,
// every other Ray process, the gcs_server last — and each bucket gets a
// third of the grace period. In a bucket, every process found is sent
// SIGTERM (SIGKILL with --force); those still running at the end of the
// bucket's share are sent SIGKILL and waited for up to 2 s more. simnode
// runs a node's raylet, and the head's GCS and dashboard, in one daemon
// process, so its buckets are the daemons, then their workers; the GCS
// bucket is the head's daemon, already stopped. When stop returns, every
// process it found has ended (within those limits), and with it every port
// they listened on.
func stop(ctx context.Context, p *sim.Proc, v *click.Values) int {
	log := newCLILogger(p, v.Str("log_style"))
	root := rayRoot(p.Env, "")
	grace := 16 * time.Second
	if v.IsSet("grace_period") {
		grace = time.Duration(v.IntValue("grace_period")) * time.Second
	}
	sig := syscall.SIGTERM
	if v.Flag("force") {
		sig = syscall.SIGKILL
	}
	const buckets = 3 // scripts.py: raylet, the others, gcs_server
	daemons, workers := rayProcesses(root)
	found, stopped := 0, 0
	var notStopped []int
	for _, bucket := range [][]rayProc{daemons, workers} {
		var signalled []rayProc
		for _, rp := range bucket {
			if rp.signal(sig) {
				signalled = append(signalled, rp)
			}
		}
		found += len(signalled)
		gone, alive := waitGone(ctx, signalled, grace/buckets)
		stopped += len(gone)
		for _, rp := range alive {
			rp.signal(syscall.SIGKILL)
			notStopped = append(notStopped, rp.pid)
		}
		waitGone(ctx, alive, stopKillWait)
	}
	switch {
	case found == 0:
		log.Print(lnStopSummary, "Did not find any active Ray processes.")
	case stopped == found:
		log.Success(lnStopSummary, "Stopped all %d Ray processes.", stopped)
	default:
		log.Warning(lnStopSummary, "Stopped only %d out of %d Ray processes within the grace period %d seconds. Set `-v` to see more details. Remaining processes %v will be forcefully terminated.", stopped, found, int(grace.Seconds()), notStopped)
		log.Warning(lnStopSummary, "You can also use `--force` to forcefully terminate processes or set higher `--grace-period` to wait longer time for proper termination.")
	}
	_ = os.Remove(currentClusterFile(root))
	return 0
}
