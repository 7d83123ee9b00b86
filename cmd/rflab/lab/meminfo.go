//go:build linux

package lab

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/state/jsonfile"
)

// Every node shares this machine's /proc, so /proc/meminfo would show the
// machine's memory instead of the node's simulated memory (119.70 GiB on a
// DGX Spark). As LXCFS does for containers, each node's sshd runs in its own
// mount namespace where a file rendered from the node's hardware is
// bind-mounted over /proc/meminfo; every SSH session (and `lab exec`)
// inherits it. dockerd is not in that namespace: containers have their own
// /proc and the daemon keeps seeing the real one. The namespace dies with
// its last process, so `lab down` has no mount to undo.

// simBaseUsedMiB is the memory an idle simulated node has in use: simnode's
// default BaseUsedMiB (cmd/simnode/internal/hw), so MemAvailable agrees with
// what the simulated raylet's memory monitor reports on an idle node.
const simBaseUsedMiB = 5684

// memoryMiB is the node's simulated memory in MiB, as hardware.json and
// simnode count it.
func (n Node) memoryMiB() int64 { return int64(n.MemoryGiB * 1024) }

// meminfoPath is where the node's simulated /proc/meminfo is written.
func (n Node) meminfoPath() string { return filepath.Join(n.Dir, "meminfo") }

// writeMeminfo renders the node's simulated /proc/meminfo from the real one.
func (n Node) writeMeminfo() error {
	host, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return fmt.Errorf("read /proc/meminfo: %w", err)
	}
	if err := jsonfile.WriteAtomic(n.meminfoPath(), renderMeminfo(string(host), n.memoryMiB()), 0o644); err != nil {
		return fmt.Errorf("write meminfo of %s: %w", n.Name, err)
	}
	return nil
}

// renderMeminfo returns host (the machine's /proc/meminfo) with MemTotal set to
// memoryMiB, MemAvailable to it less what an idle simulated node uses, and
// MemFree to MemAvailable less the host's page cache and buffers, so the file
// stays internally consistent. Every other line is copied unchanged.
func renderMeminfo(host string, memoryMiB int64) []byte {
	totalKiB := memoryMiB * 1024
	usedKiB := min(int64(simBaseUsedMiB)*1024, totalKiB/2)
	availKiB := totalKiB - usedKiB
	cacheKiB := int64(0)
	for _, k := range []string{"Buffers", "Cached"} {
		if v, ok := meminfoValue(host, k); ok {
			cacheKiB += v
		}
	}
	freeKiB := max(availKiB-min(cacheKiB, availKiB/2), 0)
	set := map[string]int64{"MemTotal": totalKiB, "MemFree": freeKiB, "MemAvailable": availKiB}
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(host))
	for sc.Scan() {
		line := sc.Text()
		k, _, _ := strings.Cut(line, ":")
		if v, ok := set[k]; ok {
			line = meminfoLine(k, v)
			delete(set, k)
		}
		b.WriteString(line + "\n")
	}
	// A meminfo without these lines (not Linux's) still gets them.
	for _, k := range []string{"MemTotal", "MemFree", "MemAvailable"} {
		if v, ok := set[k]; ok {
			b.WriteString(meminfoLine(k, v) + "\n")
		}
	}
	return []byte(b.String())
}

// meminfoLine formats a line as the kernel does: the label padded to 16
// columns, the value right-aligned in 8.
func meminfoLine(key string, kib int64) string {
	return fmt.Sprintf("%-16s%8d kB", key+":", kib)
}

// meminfoValue returns the value of key (in kB) in a /proc/meminfo.
func meminfoValue(meminfo, key string) (int64, bool) {
	for line := range strings.SplitSeq(meminfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n, err == nil
	}
	return 0, false
}
