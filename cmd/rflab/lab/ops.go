//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ClientName is the name Command and Exec accept for the client namespace.
const ClientName = "client"

// Command returns a command that runs argv in the namespace of node (a node
// name, or "client" for the client namespace) with the node's session
// environment (DOCKER_HOST, SIMNODE_HARDWARE, PATH, HOME), as an SSH session
// on that node would have. In the client namespace HOME is the lab's client
// home, whose ~/.ssh makes plain `ssh spark1` and rayform reach the nodes.
// The caller wires stdio and runs it.
func (l *Lab) Command(ctx context.Context, node string, argv ...string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command given")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("find ip: %w", err)
	}
	env := []string{"PATH=" + stdPath, "LANG=C.UTF-8", "RAYFORM_LAB_DIR=" + l.Dir}
	if term := os.Getenv("TERM"); term != "" {
		env = append(env, "TERM="+term)
	}
	// Input variables reach rayform in the lab as they would outside it.
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "RAYFORM_VAR_") || strings.HasPrefix(kv, "NO_COLOR=") || strings.HasPrefix(kv, "RAYFORM_LOG=") {
			env = append(env, kv)
		}
	}
	if node == ClientName {
		cmd := exec.CommandContext(ctx, ip, append([]string{"netns", "exec", l.ClientNetns}, argv...)...)
		cmd.Env = append(env, "HOME="+l.ClientHome)
		return cmd, nil
	}
	n, err := l.Node(node)
	if err != nil {
		return nil, err
	}
	if n.PoweredOff {
		return nil, fmt.Errorf("node %s is powered off", n.Name)
	}
	var nsenter, unshare, sh string
	for dst, name := range map[*string]string{&nsenter: "nsenter", &unshare: "unshare", &sh: "sh"} {
		if *dst, err = exec.LookPath(name); err != nil {
			return nil, fmt.Errorf("find %s: %w", name, err)
		}
	}
	// As in an SSH session, /proc/meminfo shows the node's simulated
	// memory and ModelCacheMount its own model cache.
	args := append([]string{"--uts=" + filepath.Join(n.Dir, "uts"), "--"},
		n.withMounts(unshare, sh, true, append([]string{ip, "netns", "exec", n.Netns}, argv...))...)
	cmd := exec.CommandContext(ctx, nsenter, args...)
	cmd.Env = append(env[1:], n.sessionEnv()...)
	return cmd, nil
}

// Health reports what is wrong with a lab that should be up, or nil.
func (l *Lab) Health(ctx context.Context) error {
	var errs []error
	for _, ns := range append([]string{l.ClientNetns, l.FabricNetns}, l.nodeNetns()...) {
		if _, err := os.Stat(netnsPath(ns)); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s is missing", ns))
		}
	}
	st, err := newSupClient(l.SupervisorSocket).procs(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("supervisor: %w", err))...)
	}
	running := map[string]bool{}
	for _, p := range st {
		running[p.ID] = p.Running
	}
	for _, id := range l.expectedProcs() {
		if !running[id] {
			errs = append(errs, fmt.Errorf("%s is not running", id))
		}
	}
	return errors.Join(errs...)
}

// expectedProcs lists the supervisor ids that should be running.
func (l *Lab) expectedProcs() []string {
	var ids []string
	if l.Docker {
		ids = append(ids, "registry")
	}
	for _, n := range l.Nodes {
		if l.Delay > 0 {
			ids = append(ids, nodeProcID(n.Name, "delay"))
		}
		if n.PoweredOff {
			continue
		}
		ids = append(ids, nodeProcID(n.Name, "sshd"))
		if l.Docker {
			ids = append(ids, nodeProcID(n.Name, "dockerd"))
		}
	}
	return ids
}

// Status is a snapshot of the lab's processes.
type Status struct {
	Lab   *Lab
	Procs map[string]ProcStatus
	// SupervisorErr is set when the supervisor did not answer.
	SupervisorErr error
	// Problems is Health's verdict.
	Problems error
}

// Status queries the supervisor and checks the lab's health.
func (l *Lab) Status(ctx context.Context) Status {
	s := Status{Lab: l, Procs: map[string]ProcStatus{}}
	st, err := newSupClient(l.SupervisorSocket).procs(ctx)
	if err != nil {
		s.SupervisorErr = err
	}
	for _, p := range st {
		s.Procs[p.ID] = p
	}
	s.Problems = l.Health(ctx)
	return s
}

// Cut takes node's fabric port down (cut=true) or back up.
func (l *Lab) Cut(ctx context.Context, node string, cut bool) error {
	return l.update(node, func(n *Node) error {
		state := "up"
		if cut {
			state = "down"
		}
		if !n.PoweredOff {
			if err := ipBatch(ctx, l.FabricNetns, []string{fmt.Sprintf("link set %s-f %s", n.Name, state)}); err != nil {
				return fmt.Errorf("cut %s: %w", n.Name, err)
			}
		}
		n.Cut = cut
		return nil
	})
}

// Reboot reboots node: its dockerd shuts down (stopping every container) and
// sshd stops, then both start again; files, images and containers' state are
// kept, as on a host that reboots. Containers with a restart policy come back.
func (l *Lab) Reboot(ctx context.Context, node string) error {
	return l.update(node, func(n *Node) error {
		if n.PoweredOff {
			return fmt.Errorf("node %s is powered off; use PowerOn", n.Name)
		}
		sup := newSupClient(l.SupervisorSocket)
		if l.Docker {
			if _, err := sup.stop(ctx, 20*time.Second, nodeProcID(n.Name, "dockerd")); err != nil {
				return err
			}
		}
		if _, err := sup.stop(ctx, 5*time.Second, nodeProcID(n.Name, "sshd")); err != nil {
			return err
		}
		if err := l.killNode(ctx, *n); err != nil {
			return err
		}
		t, err := hostTools(l.Docker, false)
		if err != nil {
			return err
		}
		return l.startNodes(ctx, sup, t, []Node{*n})
	})
}

// PowerOff cuts node's power: every process of the node is killed at once
// and its links go down, so its addresses stop answering.
func (l *Lab) PowerOff(ctx context.Context, node string) error {
	return l.update(node, func(n *Node) error {
		if n.PoweredOff {
			return nil
		}
		if err := l.links(ctx, *n, "down"); err != nil {
			return err
		}
		sup := newSupClient(l.SupervisorSocket)
		ids := []string{nodeProcID(n.Name, "sshd")}
		if l.Docker {
			ids = append(ids, nodeProcID(n.Name, "dockerd"))
		}
		if _, err := sup.kill(ctx, ids...); err != nil {
			return err
		}
		if err := l.killNode(ctx, *n); err != nil {
			return err
		}
		n.PoweredOff = true
		return nil
	})
}

// PowerOn powers a node that PowerOff stopped back on.
func (l *Lab) PowerOn(ctx context.Context, node string) error {
	return l.update(node, func(n *Node) error {
		if !n.PoweredOff {
			return nil
		}
		if err := l.links(ctx, *n, "up"); err != nil {
			return err
		}
		t, err := hostTools(l.Docker, false)
		if err != nil {
			return err
		}
		if err := l.startNodes(ctx, newSupClient(l.SupervisorSocket), t, []Node{*n}); err != nil {
			return err
		}
		n.PoweredOff = false
		return nil
	})
}

// links sets the switch-side ports of node up or down (the fabric port
// stays down while the node is cut).
func (l *Lab) links(ctx context.Context, n Node, state string) error {
	if err := ipBatch(ctx, l.ClientNetns, []string{fmt.Sprintf("link set %s-m %s", n.Name, state)}); err != nil {
		return fmt.Errorf("management link of %s: %w", n.Name, err)
	}
	if state == "up" && n.Cut {
		return nil
	}
	if err := ipBatch(ctx, l.FabricNetns, []string{fmt.Sprintf("link set %s-f %s", n.Name, state)}); err != nil {
		return fmt.Errorf("fabric link of %s: %w", n.Name, err)
	}
	return nil
}

// killNode kills whatever still runs on node (containers included) and
// detaches dockerd's mounts, keeping its data.
func (l *Lab) killNode(ctx context.Context, n Node) error {
	// Only this node's: its namespace, its directory, and the cgroup parent
	// its dockerd puts containers in (not every node's, as the lab-wide
	// cgroup prefix would match).
	cg := "/" + l.Name + "-" + n.Name
	procs := procsOf(n.Dir, []string{n.Netns}, func(pid int) bool { return inCgroupExactly(pid, cg) })
	if err := killAndWait(ctx, procs, syscall.SIGKILL, 0); err != nil {
		return fmt.Errorf("stop processes of %s: %w", n.Name, err)
	}
	var errs []error
	for _, d := range []string{"docker", "exec"} {
		if err := unmountUnder(filepath.Join(n.Dir, d)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func inCgroupExactly(pid int, cg string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[2] == cg || strings.HasPrefix(parts[2], cg+"/")) {
			return true
		}
	}
	return false
}

// update runs fn on node under the lab's lock and saves lab.json.
func (l *Lab) update(node string, fn func(*Node) error) error {
	lock, err := os.OpenFile(filepath.Join(l.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock lab: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock lab: %w", err)
	}
	fresh, err := Load(l.Dir)
	if err != nil {
		return err
	}
	*l = *fresh
	n, err := l.Node(node)
	if err != nil {
		return err
	}
	ferr := fn(n)
	if err := l.save(); err != nil {
		return errors.Join(ferr, err)
	}
	return ferr
}

// SortedProcIDs returns the ids of s.Procs in order.
func (s Status) SortedProcIDs() []string {
	ids := make([]string, 0, len(s.Procs))
	for id := range s.Procs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
