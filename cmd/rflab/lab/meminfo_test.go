//go:build linux

package lab

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// hostMeminfo is the start of this VM's /proc/meminfo at the time of writing.
const hostMeminfo = `MemTotal:       24684092 kB
MemFree:        22280728 kB
MemAvailable:   24025124 kB
Buffers:           39552 kB
Cached:          1782600 kB
SwapCached:            0 kB
Active:           913488 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
`

func TestRenderMeminfo(t *testing.T) {
	tests := []struct {
		name      string
		host      string
		memoryMiB int64
		want      string
	}{
		{
			name:      "DGX Spark 119.70 GiB",
			host:      hostMeminfo,
			memoryMiB: Node{MemoryGiB: DefaultMemoryGiB}.memoryMiB(),
			// 122572 MiB; available = total - 5684 MiB; free = available - (39552+1782600).
			want: `MemTotal:       125513728 kB
MemFree:        117871160 kB
MemAvailable:   119693312 kB
Buffers:           39552 kB
Cached:          1782600 kB
SwapCached:            0 kB
Active:           913488 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
`,
		},
		{
			name:      "64 GiB",
			host:      hostMeminfo,
			memoryMiB: Node{MemoryGiB: 64}.memoryMiB(),
			want: `MemTotal:       67108864 kB
MemFree:        59466296 kB
MemAvailable:   61288448 kB
Buffers:           39552 kB
Cached:          1782600 kB
SwapCached:            0 kB
Active:           913488 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
`,
		},
		{
			// Smaller than an idle node's use: half stays available, and the
			// page cache never takes all of it.
			name:      "tiny node",
			host:      hostMeminfo,
			memoryMiB: 1024,
			want: `MemTotal:        1048576 kB
MemFree:          262144 kB
MemAvailable:     524288 kB
Buffers:           39552 kB
Cached:          1782600 kB
SwapCached:            0 kB
Active:           913488 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
`,
		},
		{
			name:      "lines missing from the host are added",
			host:      "Buffers: 0 kB\n",
			memoryMiB: 2048,
			want: `Buffers: 0 kB
MemTotal:        2097152 kB
MemFree:         1048576 kB
MemAvailable:    1048576 kB
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(renderMeminfo(tt.host, tt.memoryMiB)); got != tt.want {
				t.Errorf("renderMeminfo(%d MiB) =\n%s\nwant\n%s", tt.memoryMiB, got, tt.want)
			}
		})
	}
}

// TestSimulatedMeminfo checks that SSH sessions and `lab exec` on a node see
// the node's simulated memory in /proc/meminfo while this machine's stays
// as it is.
func TestSimulatedMeminfo(t *testing.T) {
	requireLab(t, false)
	rootBefore, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	rootTotal, _ := meminfoValue(string(rootBefore), "MemTotal")
	l := upLab(t, Config{Name: testLabName("rfl-mem"), Nodes: 2, NoDocker: true, Overrides: []string{"spark2.memory-gib=64"}})
	tests := []struct {
		node     string
		totalKiB int64
	}{
		{"spark1", 125513728}, // 119.70 GiB = 122572 MiB, as hardware.json
		{"spark2", 67108864},  // 64 GiB
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			want := fmt.Sprintf("MemTotal:       %d kB", tt.totalKiB)
			if got := strings.TrimSpace(sshOK(t, l, tt.node, "grep MemTotal /proc/meminfo")); got != want {
				t.Errorf("ssh %s grep MemTotal /proc/meminfo = %q, want %q", tt.node, got, want)
			}
			out := sshOK(t, l, tt.node, "cat /proc/meminfo")
			avail, ok := meminfoValue(out, "MemAvailable")
			if !ok || avail <= 0 || avail >= tt.totalKiB {
				t.Errorf("%s MemAvailable = %d (found %v), want within (0, %d)", tt.node, avail, ok, tt.totalKiB)
			}
			execOut, err := labRun(t, l, tt.node, "grep", "MemTotal", "/proc/meminfo")
			if err != nil || strings.TrimSpace(execOut) != want {
				t.Errorf("lab exec %s grep MemTotal = %q, %v; want %q", tt.node, execOut, err, want)
			}
		})
	}
	t.Run("root namespace unchanged", func(t *testing.T) {
		b, err := os.ReadFile("/proc/meminfo")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := meminfoValue(string(b), "MemTotal"); got != rootTotal {
			t.Errorf("root /proc/meminfo MemTotal = %d kB, was %d kB before the lab", got, rootTotal)
		}
		mounts, err := os.ReadFile("/proc/self/mounts")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(mounts), "/proc/meminfo") {
			t.Errorf("/proc/meminfo is a mount point in the root mount namespace:\n%s", mounts)
		}
	})
}
