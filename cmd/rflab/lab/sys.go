//go:build linux

package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// run runs a host command and returns its stdout. A failure is wrapped with
// the command line and its stderr.
func run(ctx context.Context, stdin string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		line := strings.Join(append([]string{name}, args...), " ")
		if stdin != "" {
			line += " <<" + strconv.Quote(firstLines(stdin, 3))
		}
		return stdout.Bytes(), fmt.Errorf("%s: %w: %s", line, err, msg)
	}
	return stdout.Bytes(), nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

// ipBatch runs `ip [-n netns] -batch -` with the given lines.
func ipBatch(ctx context.Context, netns string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	args := []string{"-batch", "-"}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	_, err := run(ctx, strings.Join(lines, "\n")+"\n", "ip", args...)
	return err
}

// inNetns runs fn on an OS thread switched into the network namespace at
// path. Sockets fn creates belong to that namespace and stay usable after
// inNetns returns. The thread is put back into its namespace afterwards, or
// discarded if that fails.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open own network namespace: %w", err)
			return // the locked thread exits with the goroutine
		}
		defer unix.Close(orig)
		target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open network namespace %s: %w", path, err)
			runtime.UnlockOSThread()
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// dialIn dials addr from inside the network namespace at nsPath.
func dialIn(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(nsPath, func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		conn = c
		return err
	})
	return conn, err
}

// writeSysctl writes value to /proc/sys/<key> (key with slashes) inside the
// network namespace at nsPath.
func writeSysctl(nsPath, key, value string) error {
	return inNetns(nsPath, func() error {
		p := filepath.Join("/proc/sys", key)
		if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, nsPath, err)
		}
		return nil
	})
}

// nsInode returns the inode identifying the namespace file at path.
func nsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// procInfo is one process found by a /proc scan.
type procInfo struct {
	PID     int
	Cmdline string
}

// listProcs returns live (non-zombie) processes matching keep.
func listProcs(keep func(pid int, cmdline string) bool) []procInfo {
	ents, _ := os.ReadDir("/proc")
	var out []procInfo
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if zombieOrGone(pid) {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		if keep(pid, cmd) {
			out = append(out, procInfo{PID: pid, Cmdline: cmd})
		}
	}
	return out
}

// procsInNetns lists live processes whose network namespace is the one at nsPath.
func procsInNetns(nsPath string) []procInfo {
	ino, err := nsInode(nsPath)
	if err != nil {
		return nil
	}
	want := fmt.Sprintf("net:[%d]", ino)
	return listProcs(func(pid int, _ string) bool {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		return err == nil && link == want
	})
}

// zombieOrGone reports whether pid no longer runs (exited or a zombie).
func zombieOrGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	return s[i+2] == 'Z' || s[i+2] == 'X'
}

// killAndWait sends sig to every process, then SIGKILL to those still
// running after grace, and waits (polling, bounded by ctx) until all are gone.
func killAndWait(ctx context.Context, procs []procInfo, sig syscall.Signal, grace time.Duration) error {
	if len(procs) == 0 {
		return nil
	}
	for _, p := range procs {
		_ = syscall.Kill(p.PID, sig)
	}
	deadline := time.Now().Add(grace)
	killed := sig == syscall.SIGKILL
	for {
		var alive []procInfo
		for _, p := range procs {
			if !zombieOrGone(p.PID) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if !killed && time.Now().After(deadline) {
			for _, p := range alive {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
			killed = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d processes to exit (first: %d %q): %w", len(alive), alive[0].PID, alive[0].Cmdline, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		procs = alive
	}
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		mp := unescapeMount(fields[1])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes of /proc/mounts (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount at or below dir.
func unmountUnder(dir string) error {
	var errs []error
	for range 5 { // mounts can be stacked; repeat until none is left
		mps, err := mountsUnder(dir)
		if err != nil {
			return fmt.Errorf("list mounts under %s: %w", dir, err)
		}
		if len(mps) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, mp := range mps {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("umount %s: %w", mp, err))
			}
		}
	}
	if mps, _ := mountsUnder(dir); len(mps) > 0 {
		errs = append(errs, fmt.Errorf("mounts left under %s: %v", dir, mps))
	}
	return errors.Join(errs...)
}

// waitFor polls check until it returns nil or ctx/the timeout ends; the last
// error is returned, prefixed by what.
func waitFor(ctx context.Context, what string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 10 * time.Millisecond
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		var stop backoffStop
		if errors.As(err, &stop) {
			return fmt.Errorf("%s: %w", what, stop.error)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready after %v: %w", what, timeout, err)
		case <-time.After(delay):
		}
		if delay < 200*time.Millisecond {
			delay *= 2
		}
	}
}

// ListenIn listens on addr inside the lab's network namespace netns (a
// name under /var/run/netns, like NAME-client): tests serve there what
// rayform, run in that namespace, connects to.
func ListenIn(netns, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetns(netnsPath(netns), func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}
