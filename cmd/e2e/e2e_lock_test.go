//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// End-to-end tests of the cluster lock under faults (issue 12, findings 1
// and 2): the lock is never silently lost and never stale for long.

// nodeCmdlines returns the command line of every process in node's network
// namespace, by pid.
func (l *e2eLab) nodeCmdlines(node string) map[int]string {
	l.t.Helper()
	lb, err := lab.Load(l.dir)
	if err != nil {
		l.t.Fatal(err)
	}
	n, err := lb.Node(node)
	if err != nil {
		l.t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(n.NetnsPath(), &st); err != nil {
		l.t.Fatal(err)
	}
	want := fmt.Sprintf("net:[%d]", st.Ino)
	entries, _ := os.ReadDir("/proc")
	out := map[int]string{}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err != nil || ns != want {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out[pid] = string(cmdline)
	}
	return out
}

// sshSessions returns the pids of the SSH sessions (not the listener) that
// node's sshd serves.
func (l *e2eLab) sshSessions(node string) []int {
	l.t.Helper()
	var pids []int
	for pid, c := range l.nodeCmdlines(node) {
		if strings.HasPrefix(c, "sshd: root") || strings.HasPrefix(c, "sshd-session: root") {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// entriesAfter returns the -log-level=debug entries of stderr that follow
// the first one containing marker, and whether there was one.
func entriesAfter(stderr, marker string) ([]string, bool) {
	i := strings.Index(stderr, marker)
	if i < 0 {
		return nil, false
	}
	return mutations(stderr[i+len(marker):]), true
}

// TestE2ELock drives the cluster lock through its faults on one lab, each
// followed by an apply that converges and a plan with no changes:
//
//   - the head's SSH connection drops mid-apply: the apply stops naming the
//     lost lock and changes nothing after it knew; a destroy started
//     meanwhile either finds the lock held or runs alone;
//   - a worker's SSH connection drops mid-apply;
//   - a stuck apply (stopped) holds the lock: destroy is refused naming
//     "rayform apply"; force-unlock shows the holder and frees it after yes;
//   - the client vanishes mid-apply (packets dropped, then killed, so the
//     head never sees the connection close): the next apply is told who
//     holds the lock, and one that waits (-lock-timeout) takes it once the
//     lease expired.
func TestE2ELock(t *testing.T) {
	// Fast mode: the subject is the state lock and its leases over lost
	// connections, not Ray.
	l := startLab(t, "rfe2elock", fastRay...)
	dir := l.config(clusterConfig("enp1s0f1np1", seedImage, false, 0.85))
	converges := func(t *testing.T) {
		t.Helper()
		mustCode(t, "apply after the fault", l.rayform("", "-chdir="+dir, "apply", "-auto-approve"), exitOK)
		mustCode(t, "plan after the fault", l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode"), exitOK)
	}
	// midApply starts an apply from nothing and returns once it works on
	// the workers.
	midApply := func(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer) {
		t.Helper()
		mustCode(t, "destroy before the fault", l.rayform("", "-chdir="+dir, "destroy", "-auto-approve"), exitOK)
		cmd, out := l.start(append([]string{"-chdir=" + dir}, append(args, "apply", "-auto-approve")...)...)
		waitFor(t, "the apply to be starting the workers", 2*time.Minute, func() bool {
			return strings.Contains(out.String(), "reach the GCS")
		})
		return cmd, out
	}

	t.Run("head connection drops", func(t *testing.T) {
		first, out := midApply(t, "-log-level=debug")
		sessions := l.sshSessions("spark1")
		if len(sessions) == 0 {
			t.Fatal("no SSH session to spark1 found while apply runs")
		}
		for _, pid := range sessions {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		destroy, destroyOut := l.start("-chdir="+dir, "destroy", "-auto-approve")
		if err := first.Wait(); err == nil {
			t.Fatalf("apply whose head connection dropped exited 0\n%s", out)
		}
		mustContain(t, "apply that lost its lock", out.String(), "lock lost", "on spark1", "rayform stopped")
		after, ok := entriesAfter(out.String(), "cluster lock lost")
		if !ok {
			t.Fatalf("the debug log does not record the loss\n%s", out)
		}
		if len(after) > 0 {
			t.Errorf("apply ran mutating commands after it knew the lock was lost:\n%s", strings.Join(after, "\n"))
		}
		if err := destroy.Wait(); err != nil && !strings.Contains(destroyOut.String(), "is held by") {
			t.Errorf("the concurrent destroy failed for another reason than the lock: %v\n%s", err, destroyOut)
		}
		converges(t)
	})

	t.Run("worker connection drops", func(t *testing.T) {
		first, out := midApply(t)
		sessions := l.sshSessions("spark2")
		if len(sessions) == 0 {
			t.Fatal("no SSH session to spark2 found while apply runs")
		}
		for _, pid := range sessions {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		// Whether the step in flight failed (naming spark2) or the
		// transport's next command reconnected, the run ends and the
		// next one converges.
		if err := first.Wait(); err != nil && !strings.Contains(out.String(), "spark2") {
			t.Errorf("the failed apply does not name spark2\n%s", out)
		}
		converges(t)
	})

	t.Run("force-unlock of a stuck apply", func(t *testing.T) {
		r := l.rayform("", "-chdir="+dir, "force-unlock", "spark")
		mustCode(t, "force-unlock of a free lock", r, exitOK)
		mustContain(t, "force-unlock of a free lock", r.stdout, "ray_cluster.spark is not locked.")

		stuck, out := midApply(t)
		if err := stuck.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer func() { stuck.Process.Kill(); stuck.Wait() }()
		r = l.rayform("", "-chdir="+dir, "destroy", "-auto-approve")
		mustCode(t, "destroy while an apply holds the lock", r, exitError)
		mustContain(t, "destroy while an apply holds the lock", r.stderr, "is held by", "rayform apply since")
		r = l.rayform("no\n", "-chdir="+dir, "force-unlock", "spark")
		mustCode(t, "force-unlock answered no", r, exitError)
		r = l.rayform("yes\n", "-chdir="+dir, "force-unlock", "spark")
		mustCode(t, "force-unlock", r, exitOK)
		mustContain(t, "force-unlock", r.stdout, "is held by", "rayform apply since", "Do you really want to force-unlock?", "has been released")
		stuck.Process.Kill()
		stuck.Wait()
		_ = out
		converges(t)
	})

	t.Run("client vanishes", func(t *testing.T) {
		first, _ := midApply(t)
		// Every packet of its SSH connections is dropped from now on (as
		// when a laptop's network goes away), then it is killed: no FIN or
		// RST ever reaches the hosts.
		ss, err := exec.Command("ip", "netns", "exec", l.name+"-client", "ss", "-Htn", "state", "established", "( dport = :22 )").CombinedOutput()
		if err != nil {
			t.Fatalf("ss: %v\n%s", err, ss)
		}
		var ports []string
		for _, line := range strings.Split(strings.TrimSpace(string(ss)), "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 {
				ports = append(ports, f[len(f)-2][strings.LastIndex(f[len(f)-2], ":")+1:])
			}
		}
		if len(ports) == 0 {
			t.Fatalf("no SSH connection of the running apply found:\n%s", ss)
		}
		for _, port := range ports {
			for _, rule := range [][]string{{"OUTPUT", "--sport"}, {"INPUT", "--dport"}} {
				if o, err := exec.Command("ip", "netns", "exec", l.name+"-client", "iptables", "-I", rule[0], "-p", "tcp", rule[1], port, "-j", "DROP").CombinedOutput(); err != nil {
					t.Fatalf("iptables: %v\n%s", err, o)
				}
			}
		}
		first.Process.Kill()
		first.Wait()

		r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
		mustCode(t, "apply while the vanished client's lease runs", r, exitError)
		mustContain(t, "apply while the vanished client's lease runs", r.stderr, "is held by", "rayform apply since", "lease renewed", "force-unlock")

		r = l.rayform("", "-chdir="+dir, "apply", "-auto-approve", "-lock-timeout=2m")
		mustCode(t, "apply waiting for the lock", r, exitOK)
		mustContain(t, "apply waiting for the lock", r.stderr, "Waiting up to 2m0s for the lock of ray_cluster.spark")
		mustCode(t, "plan after the vanished client", l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode"), exitOK)
	})
}
