//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Down removes everything the lab called cfg.Name (in cfg.Dir) made: its
// processes (sshd, dockerd, containerd, shims, containers, the registry, the
// supervisor), mounts, cgroups, namespaces and directory. It is idempotent:
// Down on a lab that is not up, or half up, cleans whatever is left.
// The image cache (cfg.CacheDir) is kept.
func Down(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root to tear down namespaces and processes (try sudo)")
	}
	if err := checkLabDir(cfg.Dir); err != nil {
		return err
	}
	start := time.Now()
	var errs []error

	// 1. Graceful stop through the supervisor: dockerd stops its containers
	// and containerd; then everything else.
	// Containers die first, at once: nothing in a lab needs a graceful stop,
	// and dockerd then shuts down without waiting out stop timeouts.
	containers := listProcs(func(pid int, _ string) bool { return inLabCgroup(pid, "/"+cfg.Name+"-spark") })
	if err := killAndWait(ctx, containers, syscall.SIGKILL, 0); err != nil {
		errs = append(errs, err)
	}
	sock := filepath.Join(cfg.Dir, supervisorSock)
	if _, err := os.Stat(sock); err == nil {
		sup := newSupClient(sock)
		if st, err := sup.procs(ctx); err == nil {
			var dockerds, others []string
			for _, p := range st {
				if !p.Running {
					continue
				}
				if strings.HasSuffix(p.ID, "/dockerd") {
					dockerds = append(dockerds, p.ID)
				} else {
					others = append(others, p.ID)
				}
			}
			if len(dockerds) > 0 {
				if _, err := sup.stop(ctx, 15*time.Second, dockerds...); err != nil {
					errs = append(errs, err)
				}
			}
			if len(others) > 0 {
				if _, err := sup.stop(ctx, 5*time.Second, others...); err != nil {
					errs = append(errs, err)
				}
			}
			_ = sup.call(ctx, "POST", "/exit", nil, nil)
		}
	}
	if l, err := Load(cfg.Dir); err == nil && l.SupervisorPID > 0 {
		_ = waitFor(ctx, "supervisor exit", 5*time.Second, func(context.Context) error {
			if zombieOrGone(l.SupervisorPID) {
				return nil
			}
			return fmt.Errorf("pid %d still runs", l.SupervisorPID)
		})
	}
	cfg.emit(start, "stop", "daemons stopped")

	// 2. Sweep whatever is left: processes in the lab's namespaces or
	// cgroups, or running from the lab directory.
	nsNames := labNetns(cfg.Name)
	leftovers := labProcs(cfg.Name, cfg.Dir, nsNames)
	if err := killAndWait(ctx, leftovers, syscall.SIGTERM, 3*time.Second); err != nil {
		errs = append(errs, err)
	}
	if len(leftovers) > 0 {
		cfg.emit(start, "sweep", fmt.Sprintf("%d leftover processes", len(leftovers)))
	}

	// 3. Mounts (dockerd's overlays and nsfs, the nodes' UTS namespaces).
	if err := unmountUnder(cfg.Dir); err != nil {
		errs = append(errs, err)
	}
	// 4. Cgroups dockerd made under the lab's cgroup parents.
	if err := removeCgroups(cfg.Name); err != nil {
		errs = append(errs, err)
	}
	// 5. Namespaces.
	if len(nsNames) > 0 {
		var lines []string
		for _, ns := range nsNames {
			lines = append(lines, "netns del "+ns)
		}
		if err := ipBatch(ctx, "", lines); err != nil {
			errs = append(errs, fmt.Errorf("delete namespaces: %w", err))
		}
	}
	// 6. Files.
	if err := os.RemoveAll(cfg.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", cfg.Dir, err))
	}
	cfg.emit(start, "down", fmt.Sprintf("%d namespaces removed", len(nsNames)))
	return errors.Join(errs...)
}

// markerFile marks a directory as a lab's (Down removes only such directories).
const markerFile = ".rayform-lab"

// checkLabDir refuses a directory Down must not remove: one that exists,
// is not empty, and holds neither the lab marker nor lab.json.
func checkLabDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return nil
	}
	for _, f := range []string{markerFile, StateFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("refusing to use %s as a lab directory: it is not empty and is not a lab's (no %s or %s)", dir, markerFile, StateFile)
}

// labNetns lists the existing network namespaces of the lab called name.
func labNetns(name string) []string {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-(client|fabric|spark[0-9]+)$`)
	ents, _ := os.ReadDir("/var/run/netns")
	var out []string
	for _, e := range ents {
		if re.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// labProcs finds the lab's live processes (not this process or its ancestors).
func labProcs(name, dir string, nsNames []string) []procInfo {
	return procsOf(dir, nsNames, func(pid int) bool { return inLabCgroup(pid, "/"+name+"-spark") })
}

// procsOf lists the processes (other than this one and its ancestors) in
// one of the network namespaces nsNames, running from dir, or for which
// inCgroup holds.
func procsOf(dir string, nsNames []string, inCgroup func(pid int) bool) []procInfo {
	nsIDs := map[string]bool{}
	for _, ns := range nsNames {
		if ino, err := nsInode(netnsPath(ns)); err == nil {
			nsIDs[fmt.Sprintf("net:[%d]", ino)] = true
		}
	}
	skip := ancestors()
	return listProcs(func(pid int, cmdline string) bool {
		if skip[pid] {
			return false
		}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && nsIDs[link] {
			return true
		}
		if inCgroup(pid) {
			return true
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		for _, arg := range strings.Split(string(b), "\x00") {
			if arg == dir || strings.HasSuffix(arg, "="+dir) || strings.Contains(arg, dir+"/") {
				return true
			}
		}
		return false
	})
}

// inLabCgroup reports whether pid is in a cgroup under the lab's cgroup
// parents (where dockerd puts the containers of the lab's nodes).
func inLabCgroup(pid int, prefix string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && cgroupLinesMatch(string(b), prefix)
}

// cgroupLinesMatch reports whether a /proc/PID/cgroup content names a cgroup
// prefix+N or below it (/rflab-spark1 or /rflab-spark1/<id>, not /rflab-spark1x).
func cgroupLinesMatch(content, prefix string) bool {
	for _, line := range strings.Split(content, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && strings.HasPrefix(parts[2], prefix) {
			rest := strings.TrimPrefix(parts[2], prefix)
			digits := strings.TrimLeft(rest, "0123456789")
			if len(digits) < len(rest) && (digits == "" || digits[0] == '/') {
				return true
			}
		}
	}
	return false
}

// ancestors returns this process and its ancestors.
func ancestors() map[int]bool {
	out := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !out[pid]; {
		out[pid] = true
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			break
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			break
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			break
		}
		pid = ppid
	}
	return out
}

// removeCgroups removes the lab's cgroup directories (deepest first) in
// every hierarchy.
func removeCgroups(name string) error {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-spark[0-9]+$`)
	var errs []error
	for _, root := range roots {
		ents, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || !re.MatchString(e.Name()) {
				continue
			}
			var dirs []string
			_ = filepath.WalkDir(filepath.Join(root, e.Name()), func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
