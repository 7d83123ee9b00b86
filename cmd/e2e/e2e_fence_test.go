//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// End-to-end tests of issue 23: the lock fences every change on the hosts
// themselves, covers a cluster whose head or name changed, and tells
// deployments apart. The lab delays every packet the nodes send by 500 ms,
// so that a command is in flight long enough to be caught there.

// copyDir writes a configuration directory holding body and, when from is
// set, a copy of from's state, and returns its path. Its project is given
// with -project or comes from that state.
func (l *e2eLab) copyDir(from, body string) string {
	l.t.Helper()
	dir := l.config(body)
	if from == "" {
		return dir
	}
	b, err := os.ReadFile(filepath.Join(from, ".rayform", "state.json"))
	if err != nil {
		l.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".rayform"), 0o700); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".rayform", "state.json"), b, 0o600); err != nil {
		l.t.Fatal(err)
	}
	return dir
}

// projectContainers lists the containers labelled with project on the
// lab's nodes, as "node:name".
func (l *e2eLab) projectContainers(t *testing.T, project string) []string {
	t.Helper()
	var out []string
	for _, node := range []string{"spark1", "spark2"} {
		o, err := l.ssh(node, "docker ps -a --filter label=rayform.project="+project+" --format '{{.Names}}'")
		if err != nil {
			t.Fatalf("docker ps on %s: %v\n%s", node, err, o)
		}
		for _, name := range strings.Fields(o) {
			out = append(out, node+":"+name)
		}
	}
	return out
}

// quiet waits until no SSH session of the client is left on the nodes:
// whatever a finished run sent has run or never will.
func (l *e2eLab) quiet(t *testing.T) {
	t.Helper()
	waitFor(t, "the nodes' SSH sessions to end", 2*time.Minute, func() bool {
		return len(l.sshSessions("spark1")) == 0 && len(l.sshSessions("spark2")) == 0
	})
}

// clientPorts returns the local ports of the client namespace's SSH
// connections.
func (l *e2eLab) clientPorts(t *testing.T) []string {
	t.Helper()
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
	return ports
}

// dropRules drops (op "-I") or lets through again (op "-D") the packets
// of the client's connections from ports, in the chains given (OUTPUT:
// what the client sends, INPUT: what it receives).
func (l *e2eLab) dropRules(t *testing.T, op string, ports []string, chains ...string) {
	t.Helper()
	for _, port := range ports {
		for _, rule := range [][]string{{"OUTPUT", "--sport"}, {"INPUT", "--dport"}} {
			if !slices.Contains(chains, rule[0]) {
				continue
			}
			if o, err := exec.Command("ip", "netns", "exec", l.name+"-client", "iptables", op, rule[0], "-p", "tcp", rule[1], port, "-j", "DROP").CombinedOutput(); err != nil {
				t.Fatalf("iptables %s: %v\n%s", op, err, o)
			}
		}
	}
}

// headHolds reports whether a lock's holder record on spark1 names what.
func (l *e2eLab) headHolds(what string) bool {
	o, _ := l.ssh("spark1", "cat ~/.rayform/locks/*.holder 2>/dev/null")
	return strings.Contains(o, what)
}

// bgRun is rayform running in the background.
type bgRun struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed once it exited
	code int           // its exit code, once done
}

// waitOutput waits until the run's output holds want, failing with the
// output when the run exits first or the timeout passes.
func (b *bgRun) waitOutput(t *testing.T, what string, timeout time.Duration, want string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(b.out.String(), want) {
		select {
		case <-b.done:
			t.Fatalf("waiting for %s (%q): rayform exited %d\n%s", what, want, b.code, b.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s (%q): gave up after %s\n%s", what, want, timeout, b.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wait waits for the run to exit and returns its exit code.
func (b *bgRun) wait() int {
	<-b.done
	return b.code
}

// background starts rayform like l.start and, when the test ends, kills it
// if it still runs, waits for the hosts to be quiet and destroys what the
// project left (with dir's configuration and flags).
func (l *e2eLab) background(t *testing.T, dir string, flags []string, args ...string) *bgRun {
	t.Helper()
	// Global options, then the command, then flags and the rest.
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	cmd, out := l.start(append(append(append([]string{"-chdir=" + dir}, args[:i+1]...), flags...), args[i+1:]...)...)
	b := &bgRun{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		b.code = cmd.ProcessState.ExitCode()
		close(b.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-b.done
		l.quiet(t)
		r := l.rayform("", append(append([]string{"-chdir=" + dir, "destroy"}, flags...), "-auto-approve")...)
		if r.code != exitOK {
			t.Logf("cleaning up: %s", r)
		}
	})
	return b
}

// nodeCommandRunning reports whether a process in node's network namespace
// has a command line holding every one of parts (the SSH transport's
// wrapper holds the command it runs in its argv while it waits for the
// command's environment).
func (l *e2eLab) nodeCommandRunning(node string, parts ...string) bool {
	for _, c := range l.nodeCmdlines(node) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(c, p)
		}
		if all {
			return true
		}
	}
	return false
}

func TestE2EFencing(t *testing.T) {
	// Fast mode: the subject is the lock's fence on the hosts, which
	// refuses a late command whatever it starts.
	//
	// Each case has its own lab (fenceLab), so the cases (minutes each:
	// every packet a node sends waits 500ms) run side by side.
	t.Parallel()
	labs := 0
	fenceLab := func(t *testing.T) *e2eLab {
		labs++
		return startLab(t, fmt.Sprintf("rfe2efence%d", labs), append([]string{"-delay", "500ms"}, fastRay...)...)
	}
	body := clusterConfig("enp1s0f1np1", seedImage, false, 0.85)
	cleanProject := func(t *testing.T, project string) {
		t.Cleanup(func() { os.RemoveAll("/var/tmp/rayform/" + project) })
	}

	// Item 3: project "hb-x" with cluster "spark" and project "hb" with
	// cluster "x-spark" were one lock; force-unlock in hb killed hb-x's
	// holder.
	t.Run("force-unlock leaves another deployment's lock alone", func(t *testing.T) {
		l := fenceLab(t)
		// The projects carry the lab's name: the hosts' /var/tmp/rayform
		// is this machine's, shared with every other lab.
		p := l.name + "-hb"
		cleanProject(t, p+"-x")
		cleanProject(t, p)
		hbx := l.config(body)
		hb := l.config(strings.ReplaceAll(strings.ReplaceAll(body, `ray_cluster "spark"`, `ray_cluster "x-spark"`), "ray_cluster.spark", "ray_cluster.x-spark"))
		// hb-x's apply holds its lock at the approval prompt, renewing its
		// lease while it waits (a stopped process would let the 30 s lease
		// lapse on a loaded machine, and the lock would be free for that
		// reason, not because force-unlock left it alone).
		a, out, stdin := l.startWithStdin("-chdir="+hbx, "apply", "-project="+p+"-x")
		t.Cleanup(func() {
			stdin.Close()
			a.Process.Kill()
			a.Wait()
			l.quiet(t)
			if r := l.rayform("", "-chdir="+hbx, "destroy", "-project="+p+"-x", "-auto-approve"); r.code != exitOK {
				t.Logf("cleaning up: %s", r)
			}
		})
		waitFor(t, "hb-x's apply to hold its lock at the prompt", 3*time.Minute, func() bool { return strings.Contains(out.String(), "Enter a value:") })
		r := l.rayform("", "-chdir="+hb, "force-unlock", "-project="+p, "-force", "x-spark")
		mustCode(t, "force-unlock x-spark in hb", r, exitOK)
		mustContain(t, "force-unlock x-spark in hb", r.stdout, "ray_cluster.x-spark is not locked.")
		r = l.rayform("no\n", "-chdir="+hbx, "force-unlock", "-project="+p+"-x", "spark")
		mustContain(t, "hb-x's lock after force-unlock in hb", r.stdout, "is held by", "rayform apply since")
	})

	// Item 1: a run that lost its lease while a command was on its way
	// must not change the hosts once another run holds the lock. Two
	// folders, one project: apply A is caught while it starts the
	// workers; destroy B takes the lock once A's lease expired; then A's
	// command arrives.
	// race runs the race; with mustBeFenced, A (alive when its command
	// lands) must have been told the host refused it.
	race := func(t *testing.T, l *e2eLab, project string, mustBeFenced bool, catch func(a *exec.Cmd) (release func())) {
		t.Helper()
		cleanProject(t, project)
		dirA, dirB := l.config(body), l.config(body)
		a := l.background(t, dirA, []string{"-project=" + project}, "-log-level=debug", "apply", "-auto-approve")
		outA := a.out
		a.waitOutput(t, "A to start the workers", 4*time.Minute, "start ray workers on spark2")
		// A's `docker run` of the worker reached spark2, whose SSH wrapper
		// waits for its environment: the client sends it once it reads
		// the wrapper's first line, which the lab's delay holds back for
		// 500 ms. The fault catches A in that window.
		waitFor(t, "A's docker run to reach spark2", time.Minute, func() bool {
			return l.nodeCommandRunning("spark2", "docker", "run", "rayform.project="+project)
		})
		release := catch(a.cmd)
		b, outB := l.start("-chdir="+dirB, "destroy", "-project="+project, "-auto-approve", "-lock-timeout=2m")
		defer func() { b.Process.Kill(); b.Wait() }()
		waitFor(t, "B to take the lock", 3*time.Minute, func() bool { return l.headHolds("rayform destroy") })
		// The reproduction lets A's traffic through again now;
		// waiting for B to finish first makes A's late command land after
		// B's destroy whatever the timing.
		errB := b.Wait()
		release()
		errA := a.wait()
		l.quiet(t)
		if errB != nil || strings.Contains(outB.String(), "did not converge") {
			t.Errorf("destroy B: %v\n%s", errB, outB)
		}
		mustContain(t, "destroy B", outB.String(), "Destroy complete!")
		// A partitioned A may be gone before its late command lands (its
		// kernel still sends it); a stopped one is there to be told.
		fenced := strings.Contains(outA.String(), "exit=113") || strings.Contains(outA.String(), "fenced off")
		t.Logf("A told it was fenced off on a host: %v", fenced)
		if mustBeFenced && !fenced {
			t.Errorf("A's late command was not refused on the host (no exit 113 in its debug log)\n%s", outA)
		}
		if errA == 0 {
			t.Errorf("apply A, which lost its lock, exited 0\n%s", outA)
		}
		if left := l.projectContainers(t, project); len(left) > 0 {
			t.Errorf("containers of project %s left after B's destroy: %v\n--- A ---\n%s\n--- B ---\n%s", project, left, outA, outB)
		}
	}
	t.Run("partitioned client is fenced on the hosts", func(t *testing.T) {
		l := fenceLab(t)
		race(t, l, l.name+"-fencedrop", false, func(a *exec.Cmd) func() {
			ports := l.clientPorts(t)
			if len(ports) == 0 {
				t.Fatal("no SSH connection of A found")
			}
			// Only what A sends is dropped: the wrapper's first line
			// still reaches A, whose answer (the environment) then waits
			// in its TCP send queue until the partition heals.
			l.dropRules(t, "-I", ports, "OUTPUT")
			return func() { l.dropRules(t, "-D", ports, "OUTPUT") }
		})
	})
	t.Run("stopped client is fenced on the hosts", func(t *testing.T) {
		l := fenceLab(t)
		race(t, l, l.name+"-fencestop", true, func(a *exec.Cmd) func() {
			if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			return func() { a.Process.Signal(syscall.SIGCONT) }
		})
	})

	// Item 2: a copy of the configuration with another head, or a renamed
	// cluster carrying the same state, waits for a run of the original.
	t.Run("another head or name takes the original's lock", func(t *testing.T) {
		l := fenceLab(t)
		orig := l.config(body)
		cleanProject(t, filepath.Base(orig))
		mustCode(t, "apply the original", l.rayform("", "-chdir="+orig, "apply", "-auto-approve"), exitOK)
		otherHead := l.copyDir(orig, strings.Replace(strings.Replace(body, "head           = node.spark1", "head           = node.spark2", 1),
			"workers        = [node.spark2]", "workers        = [node.spark1]", 1))
		renamed := l.copyDir(orig, strings.ReplaceAll(strings.ReplaceAll(body, `ray_cluster "spark"`, `ray_cluster "spark_b"`), "ray_cluster.spark", "ray_cluster.spark_b"))
		a := l.background(t, orig, nil, "apply", "-auto-approve", "-replace=ray_cluster.spark")
		a.waitOutput(t, "the original's apply to hold its lock", 3*time.Minute, "start ray head")
		if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		r := l.rayform("", "-chdir="+otherHead, "apply", "-auto-approve")
		mustCode(t, "apply of a copy with another head", r, exitError)
		mustContain(t, "apply of a copy with another head", r.stderr, "is held by", "rayform apply since")
		r = l.rayform("", "-chdir="+renamed, "destroy", "-auto-approve")
		mustCode(t, "destroy of a renamed copy", r, exitError)
		mustContain(t, "destroy of a renamed copy", r.stderr, "is held by", "rayform apply since")
		a.cmd.Process.Kill()
		a.wait()
		l.quiet(t)
		mustCode(t, "apply the original again", l.rayform("", "-chdir="+orig, "apply", "-auto-approve"), exitOK)
	})

	// Item 4: a forged state entry naming a container rayform did not
	// create; plan and destroy refuse and never look inside it.
	t.Run("forged state entry", func(t *testing.T) {
		l := fenceLab(t)
		dir := l.config(body)
		project := filepath.Base(dir)
		// The window of docker events starts before the test's own exec,
		// whose event must then be the only one: docker's --since has
		// whole seconds here, and a window starting after it could still
		// hold it (a failure seen in CI) or, moved a second on, miss
		// rayform's.
		since := time.Now().Unix()
		const setup = "mkdir -p /tmp/rayform/serve && echo 1 > /tmp/rayform/serve/serve-ghost.pid && echo {} > /tmp/rayform/serve/serve-ghost.json"
		if o, err := l.ssh("spark1", "docker run -d --name victim "+seedImage+" sleep 100000 && docker exec victim sh -c '"+setup+"'"); err != nil {
			t.Fatalf("creating the victim: %v\n%s", err, o)
		}
		defer l.ssh("spark1", "docker rm -f victim")
		forged := `{"version": 1, "lineage": "6d1c4f4e-8a65-4c8e-9d43-1f6f0b7e2a11", "serial": 1, "project": "` + project + `",
  "resources": {"vllm_serve.ghost": {"type": "vllm_serve", "container": "victim", "applied_at": "2026-01-01T00:00:00Z",
    "hosts": [{"node": "spark1", "host": "10.1.230.180", "user": "root"}]}}}`
		if err := os.MkdirAll(filepath.Join(dir, ".rayform"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".rayform", "state.json"), []byte(forged), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"plan"}, {"destroy", "-auto-approve"}} {
			r := l.rayform("", append([]string{"-chdir=" + dir}, args...)...)
			mustCode(t, args[0]+" with a forged state entry", r, exitError)
			mustContain(t, args[0]+" with a forged state entry", r.stdout+r.stderr, "vllm_serve.ghost names container victim, which rayform did not create")
		}
		o, err := l.ssh("spark1", fmt.Sprintf("docker events --since %d --until %d --filter container=victim --filter event=exec_create --format '{{.Action}}'; docker exec victim ls /tmp/rayform/serve", since, time.Now().Unix()+1))
		if err != nil {
			t.Fatalf("%v\n%s", err, o)
		}
		var execs []string
		for _, line := range strings.Split(o, "\n") {
			if strings.HasPrefix(line, "exec_create") {
				execs = append(execs, line)
			}
		}
		if want := "exec_create: sh -c " + setup; len(execs) != 1 || execs[0] != want {
			t.Errorf("execs in the victim: want only the test's own %q; rayform ran commands inside it:\n%s", want, o)
		}
		mustContain(t, "the victim's files", o, "serve-ghost.pid", "serve-ghost.json")
	})
}
