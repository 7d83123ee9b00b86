package raycli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/click"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// rayProcesses finds this node's simulated Ray processes: daemons whose
// config lives under root, and their worker children. Like `ray stop`, it
// scans the process table; matching on the temp root keeps nodes that share
// a PID namespace (tests) apart.
func rayProcesses(root string) (daemons, workers []int) {
	ents, _ := os.ReadDir("/proc")
	parents := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
		if len(args) >= 3 && args[1] == DaemonCommand && strings.HasPrefix(args[2], root+string(os.PathSeparator)) {
			daemons = append(daemons, pid)
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 {
				f := strings.Fields(string(st[i+1:]))
				if len(f) > 2 {
					if pp, err := strconv.Atoi(f[1]); err == nil {
						parents[pid] = pp
					}
				}
			}
		}
	}
	for pid, pp := range parents {
		for _, d := range daemons {
			if pp == d {
				workers = append(workers, pid)
			}
		}
	}
	return daemons, workers
}

func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie has exited.
	if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
		return false
	}
	return true
}

func stop(ctx context.Context, p *sim.Proc, v *click.Values) int {
	log := newCLILogger(p, v.Str("log_style"))
	root := rayRoot(p.Env, "")
	grace := 16 * time.Second
	if v.IsSet("grace_period") {
		grace = time.Duration(v.IntValue("grace_period")) * time.Second
	}
	daemons, workers := rayProcesses(root)
	all := append(append([]int(nil), workers...), daemons...)
	if len(all) == 0 {
		log.Print(lnStopSummary, "Did not find any active Ray processes.")
		_ = os.Remove(currentClusterFile(root))
		return 0
	}
	sig := syscall.SIGTERM
	if v.Flag("force") {
		sig = syscall.SIGKILL
	}
	for _, pid := range daemons {
		_ = syscall.Kill(pid, sig)
	}
	deadline := time.Now().Add(grace)
	stopped := 0
	for _, pid := range all {
		for processAlive(pid) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		if processAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			continue
		}
		stopped++
	}
	if stopped == len(all) {
		log.Success(lnStopSummary, "Stopped all %d Ray processes.", stopped)
	} else {
		log.Warning(lnStopSummary, "Stopped only %d out of %d Ray processes within the grace period %d seconds. Set `-v` to see more details. Remaining processes %v will be forcefully terminated.", stopped, len(all), int(grace.Seconds()), all)
		log.Warning(lnStopSummary, "You can also use `--force` to forcefully terminate processes or set higher `--grace-period` to wait longer time for proper termination.")
	}
	_ = os.Remove(currentClusterFile(root))
	return 0
}
