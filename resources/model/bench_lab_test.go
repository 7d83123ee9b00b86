//go:build linux

package model

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
	"github.com/rayform/rayform/engine/transport/shell"
)

// TestBenchStagingLab measures staging node to node over a lab's fabric
// against the raw TCP floor between the same namespaces, in one run. It
// runs only with RAYFORM_BENCH_LAB set to the directory of a lab that is
// up (rflab up -nodes 3 -docker=false) or to "netns" (three
// namespaces on a bridge of its own); RAYFORM_BENCH_MIB sets the model's
// size (default 1024) and RAYFORM_BENCH_DIR where the nodes' copies go
// (default the lab directory: the lab's nodes share this machine's
// filesystem, so each gets its own directory).
//
// Each of RAYFORM_BENCH_ROUNDS rounds (default 1) measures the floor, then
// staging (every file verified: sha256 for the shards, the git blob id
// for config.json; staging has no mode that checks sizes only, since
// every received file is verified), in an order that alternates from
// round to round, so that a loaded machine's noise falls on every mode
// alike. RAYFORM_BENCH_BASELINE=FILE adds the same runs with FILE as
// the staging script (an older stage.py: git show REV:resources/model/stage.py),
// so that a change is measured against what it replaced in the same run
// (RAYFORM_BENCH_BASELINE_PYTHON: its interpreter's command line, default
// the current one);
// RAYFORM_BENCH_TWO=1 adds staging to two receivers at once;
// RAYFORM_BENCH_STREAMS sets staging's streams (default 4; the floor
// always has 4).
//
// Each run's CPU time (user + system, core-seconds) is taken per process
// from the shell that starts it (times), so the log says what each side
// costs per GB and the best ratio to the floor this machine's cores allow:
// a mode that needs C core-seconds cannot finish in less than C / cores
// seconds, so its ratio is at most floor / (C / cores). Results are logged
// (-v); BENCHMARKS.md records them.
func TestBenchStagingLab(t *testing.T) {
	dir := os.Getenv("RAYFORM_BENCH_LAB")
	if dir == "" {
		t.Skip("RAYFORM_BENCH_LAB not set")
	}
	var l *lab.Lab
	var err error
	if dir == "netns" {
		l = benchNetns(t)
		dir = t.TempDir()
	} else if l, err = lab.Load(dir); err != nil {
		t.Fatal(err)
	}
	mib := 1024
	if s := os.Getenv("RAYFORM_BENCH_MIB"); s != "" {
		if mib, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	base := os.Getenv("RAYFORM_BENCH_DIR")
	if base == "" {
		base = filepath.Join(dir, "bench")
	}
	base = filepath.Join(base, strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.RemoveAll(base) })
	benchPython(t)

	cpu := newCPULog(t, base)
	peers := benchPeers(t, l, base, cpu)
	src, a, b := peers["spark1"], peers["spark2"], peers["spark3"]
	m := benchModel(t, src.Layout, mib)
	total := m.Bytes()
	gbps := func(n int64, d time.Duration) float64 { return float64(n) * 8 / d.Seconds() / 1e9 }
	gb := float64(total) / 1e9
	cores := runtime.NumCPU()

	rounds := 1
	if s := os.Getenv("RAYFORM_BENCH_ROUNDS"); s != "" {
		if rounds, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	type variant struct {
		name           string
		script, python string
		m              Manifest
	}
	var variants []variant
	scripts := [][3]string{{"current", stageScript, stagePython}}
	if f := os.Getenv("RAYFORM_BENCH_BASELINE"); f != "" {
		old, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		py := os.Getenv("RAYFORM_BENCH_BASELINE_PYTHON")
		if py == "" {
			py = stagePython
		}
		scripts = append(scripts, [3]string{"baseline", string(old), py})
	}
	for _, s := range scripts {
		variants = append(variants, variant{s[0] + ", sha256", s[1], s[2], m})
	}
	current, currentPython := stageScript, stagePython
	t.Cleanup(func() { stageScript, stagePython = current, currentPython })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	// transfers collects each receiver's data phase (its last report).
	var mu sync.Mutex
	transfers := map[string]time.Duration{}
	streams := 4
	if s := os.Getenv("RAYFORM_BENCH_STREAMS"); s != "" {
		if streams, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	opt := StageOptions{Streams: streams, Progress: func(p Progress) {
		if p.Finished {
			mu.Lock()
			transfers[p.Node] = p.Transfer
			mu.Unlock()
		}
	}}
	type sample struct{ floor, e2e, data, cpuFloor, cpu, fixed, fixedCPU float64 }
	results := map[string][]sample{}
	var floors []float64
	var floorCPU []float64
	for r := range rounds {
		if err := os.RemoveAll(a.Layout.Dir); err != nil {
			t.Fatal(err)
		}
		// Raw TCP floor: 4 streams memory to memory, spark1 → spark2.
		cpu.reset()
		busy0 := machineBusy(t)
		floor := rawTCP(t, src, a, total, 4)
		busy := machineBusy(t).sub(busy0)
		fs, fr := cpu.take(src.Name), cpu.take(a.Name)
		floors, floorCPU = append(floors, floor.Seconds()), append(floorCPU, fs+fr)
		t.Logf("round %d: floor spark1 → spark2, 4 streams, %s: %s (%.2f Gbit/s); CPU %.2f core-s/GB (sender %.2f, receiver %.2f), machine busy %.2f core-s (softirq %.2f) [load %s]",
			r+1, GB(total), floor.Round(time.Millisecond), gbps(total, floor), (fs+fr)/gb, fs/gb, fr/gb, busy.total, busy.softirq, loadavg(t))

		order := slices.Clone(variants)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			if err := os.RemoveAll(a.Layout.Dir); err != nil {
				t.Fatal(err)
			}
			stageScript, stagePython = v.script, v.python
			cpu.reset()
			busy0 := machineBusy(t)
			start := time.Now()
			if err := Stage(ctx, v.m, src, []Peer{a}, opt); err != nil {
				t.Fatal(err)
			}
			one := time.Since(start)
			busy := machineBusy(t).sub(busy0)
			ss, sr := cpu.take(src.Name), cpu.take(a.Name)
			data := transfers[a.Name]
			sameContent(t, v.m, src.Layout, a.Layout)
			// The same call again, every file in place: what a run costs
			// besides its data (two python starts, the source's listen,
			// the receiver's size checks), to tell the data's own CPU.
			cpu.reset()
			start = time.Now()
			if err := Stage(ctx, v.m, src, []Peer{a}, opt); err != nil {
				t.Fatal(err)
			}
			fixed := time.Since(start)
			fixedCPU := cpu.take(src.Name) + cpu.take(a.Name)
			results[v.name] = append(results[v.name], sample{floor.Seconds(), one.Seconds(), data.Seconds(), fs + fr, ss + sr, fixed.Seconds(), fixedCPU})
			t.Logf("round %d: staging (%s) spark1 → spark2: %s end to end (%.2f Gbit/s, %.2f× the floor); data phase %s (%.2f Gbit/s, %.2f× the floor); CPU %.2f core-s (source %.2f, receiver %.2f; %.2f of it fixed: a run with nothing to stage, %s), %.2f core-s/GB besides; machine busy %.2f core-s (softirq %.2f) [load %s]",
				r+1, v.name, one.Round(time.Millisecond), gbps(total, one), floor.Seconds()/one.Seconds(), data.Round(time.Millisecond), gbps(total, data), floor.Seconds()/data.Seconds(),
				ss+sr, ss, sr, fixedCPU, fixed.Round(time.Millisecond), (ss+sr-fixedCPU)/gb, busy.total, busy.softirq, loadavg(t))
		}
		stageScript, stagePython = current, currentPython

		if os.Getenv("RAYFORM_BENCH_TWO") != "" {
			// Both receivers at once (the source's link is shared).
			for _, p := range []Peer{a, b} {
				if err := os.RemoveAll(p.Layout.Dir); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			if err := Stage(ctx, m, src, []Peer{a, b}, opt); err != nil {
				t.Fatal(err)
			}
			two := time.Since(start)
			slowest := max(transfers[a.Name], transfers[b.Name])
			t.Logf("round %d: staging spark1 → spark2 and spark3 at once, %s each: %s end to end (%.2f Gbit/s out of spark1); data phase of the slower %s (%.2f Gbit/s)", r+1, GB(total),
				two.Round(time.Millisecond), gbps(2*total, two), slowest.Round(time.Millisecond), gbps(2*total, slowest))
			for _, p := range []Peer{a, b} {
				sameContent(t, m, src.Layout, p.Layout)
			}
		}
	}
	// The summary: medians over the rounds. A mode that needs C
	// core-seconds cannot take less than C / cores seconds: its ratio to
	// the floor is at most floor / (C / cores), end to end with all of
	// its CPU, in the data phase with its CPU besides the fixed part.
	// Where the floor itself keeps every core busy (a quiet machine with
	// few cores), its time is its own CPU / cores, and the bound is the
	// ratio of the two CPU costs per GB; on a loaded machine the floor
	// slows with the load and floor / (C / cores) says less.
	med := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	t.Logf("summary, %s, %d rounds, %d cores, staging with %d streams: floor median %.3f s, CPU %.2f core-s/GB", GB(total), rounds, cores, streams, med(floors), med(floorCPU)/gb)
	for _, v := range variants {
		var e2e, data, cpuGB, fixed, boundE2E, boundData []float64
		for _, s := range results[v.name] {
			e2e = append(e2e, s.floor/s.e2e)
			data = append(data, s.floor/s.data)
			cpuGB = append(cpuGB, (s.cpu-s.fixedCPU)/gb)
			fixed = append(fixed, s.fixedCPU)
			boundE2E = append(boundE2E, s.floor*float64(cores)/s.cpu)
			boundData = append(boundData, s.floor*float64(cores)/(s.cpu-s.fixedCPU))
		}
		t.Logf("summary %-22s end to end %.2f× (%.2f–%.2f), data phase %.2f× (%.2f–%.2f); CPU %.2f core-s/GB + %.2f core-s fixed (floor %.2f core-s/GB); bound on %d cores: end to end %.2f×, data phase %.2f×; where the floor is CPU-bound: %.2f×", v.name+":",
			med(e2e), slices.Min(e2e), slices.Max(e2e), med(data), slices.Min(data), slices.Max(data),
			med(cpuGB), med(fixed), med(floorCPU)/gb, cores, med(boundE2E), med(boundData), med(floorCPU)/gb/med(cpuGB))
	}
}

// benchPython puts the directory of the python3 that PATH finds first,
// resolved (a pyenv shim is a shell script that execs the interpreter
// after looking up its version: 0.1 s and a few processes per start),
// so that the benchmark measures python, not the shim.
func benchPython(t *testing.T) {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	exe := strings.TrimSpace(string(out))
	t.Setenv("PATH", filepath.Dir(exe)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// cpuLog collects the CPU time of the commands the bench's peers run:
// each peer's shell appends its children's user and system time (times)
// to a file of its own when its command ends.
type cpuLog struct {
	t   *testing.T
	dir string
}

func newCPULog(t *testing.T, base string) *cpuLog {
	dir := filepath.Join(base, "cpu")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &cpuLog{t: t, dir: dir}
}

// path is the file node's shell appends to.
func (c *cpuLog) path(node string) string { return filepath.Join(c.dir, node) }

// reset forgets what was logged.
func (c *cpuLog) reset() {
	ents, _ := os.ReadDir(c.dir)
	for _, e := range ents {
		_ = os.Remove(filepath.Join(c.dir, e.Name()))
	}
}

// take is the core-seconds of node's commands ended since the last reset
// (each logs two lines, the shell's own times and its children's: the
// second counts).
func (c *cpuLog) take(node string) float64 {
	b, err := os.ReadFile(c.path(node))
	if err != nil {
		c.t.Fatalf("cpu log of %s: %v", node, err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var sum float64
	for i := 1; i < len(lines); i += 2 {
		for _, f := range strings.Fields(lines[i]) {
			sum += parseTimes(c.t, f)
		}
	}
	_ = os.Remove(c.path(node))
	return sum
}

// parseTimes reads one of times' durations: 0m1.234s.
func parseTimes(t *testing.T, s string) float64 {
	m, sec, ok := strings.Cut(strings.TrimSuffix(s, "s"), "m")
	mins, err1 := strconv.ParseFloat(m, 64)
	secs, err2 := strconv.ParseFloat(sec, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("times: %q", s)
	}
	return mins*60 + secs
}

// busy is CPU time the whole machine spent (all processes, the kernel's
// softirq work included), in core-seconds.
type busy struct{ total, softirq float64 }

func (b busy) sub(o busy) busy { return busy{b.total - o.total, b.softirq - o.softirq} }

// machineBusy reads /proc/stat's first line: user nice system idle iowait
// irq softirq steal, in clock ticks (USER_HZ, 100 on Linux).
func machineBusy(t *testing.T) busy {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var v [8]float64
	for i := range v {
		v[i], _ = strconv.ParseFloat(f[i+1], 64)
	}
	return busy{total: (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / 100, softirq: v[6] / 100}
}

// loadavg is the machine's load average over 1, 5 and 15 minutes.
func loadavg(t *testing.T) string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// benchPeers are labPeers whose shells log the CPU time of each command
// (cpu.path(node)); the command runs as the shell's child, not in its
// place, so that the shell outlives it and reads its time.
func benchPeers(t *testing.T, l *lab.Lab, base string, cpu *cpuLog) map[string]Peer {
	t.Helper()
	peers := labPeers(t, l, base)
	for _, n := range l.Nodes {
		w := filepath.Join(base, "sh-"+n.Name)
		// Stage ends its source by closing its stdin and then cancels
		// it (SIGTERM to the group): the shell logs on either way out.
		log := "times >>" + shell.Quote(cpu.path(n.Name))
		script := "#!/bin/sh\ntrap '" + log + "; exit 143' TERM\nip netns exec " + n.Netns + " /bin/sh \"$@\"\nrc=$?\n" + log + "\nexit $rc\n"
		if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return peers
}

// labPeers are the lab's nodes as staging peers: commands run in each
// node's network namespace (local connections through ip netns exec), each
// node's copy under base/NODE (the lab's nodes share this filesystem).
func labPeers(t *testing.T, l *lab.Lab, base string) map[string]Peer {
	t.Helper()
	peers := map[string]Peer{}
	for _, n := range l.Nodes {
		w := filepath.Join(base, "sh-"+n.Name)
		if err := os.MkdirAll(base, 0o755); err != nil {
			t.Fatal(err)
		}
		script := "#!/bin/sh\nexec ip netns exec " + n.Netns + " /bin/sh \"$@\"\n"
		if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		peers[n.Name] = Peer{
			Name:   n.Name,
			Conn:   local.New(local.Options{Host: n.Name, Shell: w}),
			Addr:   netip.MustParseAddr(n.FabricIP),
			Layout: HFCacheLayout(filepath.Join(base, n.Name, "hub"), "rayform-lab/bench"),
		}
	}
	return peers
}

// TestStageLabCut cuts a receiver's fabric link (lab cut) mid-copy: the
// receiver gives up after its idle timeout with the node, the file and the
// bytes received; nothing is under its final name that is not whole; the
// plan's judgment is partial with the received bytes to resume; with the
// link back, the next run resumes from them and converges. Needs a lab
// that is up (RAYFORM_BENCH_LAB=/tmp/rayform-lab-NAME).
func TestStageLabCut(t *testing.T) {
	dir := os.Getenv("RAYFORM_BENCH_LAB")
	if dir == "" || dir == "netns" {
		t.Skip("RAYFORM_BENCH_LAB is not a lab directory")
	}
	l, err := lab.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "cut", strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.RemoveAll(base) })
	cutMidCopy(t, labPeers(t, l, base), 512, func(ctx context.Context, down bool) error {
		return l.Cut(ctx, "spark2", down)
	})
}

// TestStageCutLink is TestStageLabCut on namespaces of its own (a bridge
// and three veth links, as the lab's fabric; needs root): spark2's port
// on the bridge goes down mid-copy, then up again.
func TestStageCutLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creates network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip (iproute2)")
	}
	l := benchNetns(t)
	br := strings.TrimSuffix(l.Nodes[0].Netns, "-1") + "-br"
	// spark2's port at 100 Mbit/s: the 64 MiB take ~5 s, so the cut
	// (once a quarter has arrived) lands mid-copy however fast the
	// machine is; unshaped, the veth copied it all before the link went
	// down (the copy, under a second, raced the cut).
	if out, err := exec.Command("ip", "netns", "exec", br, "tc", "qdisc", "add", "dev", "p2", "root", "tbf", "rate", "100mbit", "burst", "64kb", "latency", "400ms").CombinedOutput(); err != nil {
		t.Skipf("tc (iproute2) cannot shape the link: %v %s", err, out)
	}
	cutMidCopy(t, labPeers(t, l, t.TempDir()), 64, func(ctx context.Context, down bool) error {
		state := map[bool]string{true: "down", false: "up"}[down]
		if out, err := exec.CommandContext(ctx, "ip", "-n", br, "link", "set", "p2", state).CombinedOutput(); err != nil {
			return fmt.Errorf("ip link set p2 %s: %v %s", state, err, out)
		}
		return nil
	})
}

// cutMidCopy stages a model of mib MiB from spark1 to spark2, cuts
// spark2's link (cut(ctx, true)) once a quarter has arrived, checks the
// failure and what is left, restores the link and checks that the next
// run resumes from the bytes kept and converges.
func cutMidCopy(t *testing.T, peers map[string]Peer, mib int, cut func(ctx context.Context, down bool) error) {
	t.Helper()
	src, dst := peers["spark1"], peers["spark2"]
	m := benchModel(t, src.Layout, mib)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = cut(context.Background(), false) })
	var once sync.Once
	var cutStarted atomic.Bool
	cutDone := make(chan error, 1)
	opt := StageOptions{Streams: 4, Interval: 20 * time.Millisecond, IdleTimeout: 3 * time.Second, Progress: func(p Progress) {
		if p.Done > int64(mib)<<20/4 {
			once.Do(func() {
				cutStarted.Store(true)
				go func() { cutDone <- cut(ctx, true) }()
			})
		}
	}}
	err := Stage(ctx, m, src, []Peer{dst}, opt)
	if !cutStarted.Load() {
		t.Fatalf("staging ended (%v) before the cut", err)
	}
	// The link may be down already while the command that took it down
	// has not returned yet (a loaded machine: the streams' idle timeout
	// can end the staging first); wait for it, bounded by ctx.
	select {
	case cerr := <-cutDone:
		if cerr != nil {
			t.Fatal(cerr)
		}
	case <-ctx.Done():
		t.Fatalf("the cut did not return: %v", ctx.Err())
	}
	// A stream that was receiving times out; one that opens its next file
	// while the link is down may fail first, once ARP gives up, with
	// EHOSTUNREACH: either is the cut, named with its node and source.
	if err == nil || !strings.Contains(err.Error(), "spark2: staging rayform-lab/bench from spark1 ("+src.Addr.String()+")") ||
		!(strings.Contains(err.Error(), "timed out after") || strings.Contains(err.Error(), "No route to host")) ||
		!strings.Contains(err.Error(), "the next apply resumes it") {
		t.Fatalf("error %v, want the node, the timeout (or no route) and the bytes received", err)
	}
	t.Logf("cut mid-copy: %v", err)
	j := probe(t, m, dst.Layout)
	if j.State == Complete || j.ResumeBytes == 0 {
		t.Fatalf("after the cut: %s (resume %d), want partial with bytes to resume", j, j.ResumeBytes)
	}
	for _, f := range m.Files {
		if fi, err := os.Stat(filepath.Join(dst.Layout.Dir, dst.Layout.StorePath(m, f))); err == nil && fi.Size() != f.Size {
			t.Errorf("%s is under its final name with %d of %d bytes", f.Path, fi.Size(), f.Size)
		}
	}
	if err := cut(ctx, false); err != nil {
		t.Fatal(err)
	}
	var first []Progress
	var mu sync.Mutex
	opt.Progress = func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		first = append(first, p)
	}
	if err := Stage(ctx, m, src, []Peer{dst}, opt); err != nil {
		t.Fatal(err)
	}
	if len(first) == 0 || first[0].Done != j.ResumeBytes {
		t.Errorf("the next run started at %+v, want the %d bytes kept", first[:min(1, len(first))], j.ResumeBytes)
	}
	if j := probe(t, m, dst.Layout); j.State != Complete {
		t.Errorf("after the next run: %s", j)
	}
	sameContent(t, m, src.Layout, dst.Layout)
}

// benchNetns makes three namespaces on one bridge (the lab's fabric alone,
// for a machine without the lab's tools: RAYFORM_BENCH_LAB=netns) and
// describes them as a lab's nodes.
func benchNetns(t *testing.T) *lab.Lab {
	t.Helper()
	pre := "rfb" + strconv.Itoa(os.Getpid()%100000)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	br := pre + "-br"
	run("netns", "add", br)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", br).Run() })
	run("-n", br, "link", "add", "br0", "type", "bridge")
	run("-n", br, "link", "set", "br0", "up")
	l := &lab.Lab{}
	for i := range 3 {
		ns := pre + "-" + strconv.Itoa(i+1)
		run("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		peer := "p" + strconv.Itoa(i+1)
		run("link", "add", "eth1", "netns", ns, "type", "veth", "peer", "name", peer, "netns", br)
		run("-n", br, "link", "set", peer, "master", "br0", "up")
		ip := "192.168.250." + strconv.Itoa(12+i)
		run("-n", ns, "addr", "add", ip+"/24", "dev", "eth1")
		run("-n", ns, "link", "set", "eth1", "up")
		run("-n", ns, "link", "set", "lo", "up")
		l.Nodes = append(l.Nodes, lab.Node{Name: lab.NodeName(i), Netns: ns, FabricIP: ip})
	}
	return l
}

// benchModel writes a model of about mib MiB in 4 shards into l, as
// huggingface_hub lays it out, with sha256 for each shard and the git
// blob id of config.json.
func benchModel(t *testing.T, l Layout, mib int) Manifest {
	t.Helper()
	m := Manifest{Repo: "rayform-lab/bench", Revision: "main", Commit: commit}
	files := []File{{Path: "config.json", Size: 700}}
	for i := range 4 {
		files = append(files, File{Path: fmt.Sprintf("model-%05d-of-00004.safetensors", i+1), Size: int64(mib) << 20 / 4})
	}
	for _, f := range files {
		p := filepath.Join(l.Dir, "tmp-"+f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		h, g := sha256.New(), sha1.New()
		fmt.Fprintf(g, "blob %d\x00", f.Size)
		if _, err := io.CopyN(io.MultiWriter(w, h, g), rand.Reader, f.Size); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if f.Path == "config.json" {
			f.BlobID = hex.EncodeToString(g.Sum(nil))
		} else {
			f.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
		m.Files = append(m.Files, f)
		blob := filepath.Join(l.Dir, l.StorePath(m, f))
		snap := filepath.Join(l.Dir, l.FilePath(m, f))
		for _, d := range []string{filepath.Dir(blob), filepath.Dir(snap)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Rename(p, blob); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", f.Blob()), snap); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// rawTCP sends n bytes from src to dst's fabric address over streams TCP
// connections, memory to memory (python3 on both sides, as staging), and
// returns the time from the first connect to the last byte received.
func rawTCP(t *testing.T, src, dst Peer, n int64, streams int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	recv := `
import socket, sys, threading, time
n, k = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[3], 0)); s.listen(k)
print(s.getsockname()[1], flush=True)
conns = [s.accept()[0] for _ in range(k)]
t0 = time.monotonic()
def rd(c, want):
    buf = bytearray(1 << 20); got = 0
    while got < want:
        r = c.recv_into(buf)
        if not r: break
        got += r
ths = [threading.Thread(target=rd, args=(c, n // k)) for c in conns]
[x.start() for x in ths]; [x.join() for x in ths]
print("%.6f" % (time.monotonic() - t0), flush=True)
`
	send := `
import socket, sys, threading
n, k, host, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
buf = bytes(1 << 20)
cs = [socket.create_connection((host, port)) for _ in range(k)]
def wr(c, want):
    while want > 0:
        m = min(len(buf), want); c.sendall(buf[:m]); want -= m
ths = [threading.Thread(target=wr, args=(c, n // k)) for c in cs]
[x.start() for x in ths]; [x.join() for x in ths]
`
	per := n / int64(streams) * int64(streams)
	pr, pw := io.Pipe()
	done := make(chan transport.Result, 1)
	go func() {
		res, err := dst.Conn.Run(ctx, transport.Cmd{Argv: []string{"python3", "-c", recv, strconv.FormatInt(per, 10), strconv.Itoa(streams), dst.Addr.String()}, Stdout: pw})
		if err != nil {
			t.Errorf("receiver: %v %s", err, res.Stderr)
		}
		pw.Close()
		done <- res
	}()
	var port string
	if _, err := fmt.Fscanln(pr, &port); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck
	if res, err := src.Conn.Run(ctx, transport.Cmd{Argv: []string{"python3", "-c", send, strconv.FormatInt(per, 10), strconv.Itoa(streams), dst.Addr.String(), port}}); err != nil {
		t.Fatalf("sender: %v %s", err, res.Stderr)
	}
	res := <-done
	lines := strings.Fields(string(res.Stdout))
	secs, err := strconv.ParseFloat(lines[len(lines)-1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(secs * float64(time.Second))
}

// labHubGet GETs path from the lab hub inside node's namespace, the token on
// stdin.
func labHubGet(t *testing.T, node Peer, token, path string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	py := `
import sys, urllib.request
tok = sys.stdin.readline().strip()
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + tok})
sys.stdout.buffer.write(urllib.request.urlopen(req).read())
`
	res, err := node.Conn.Run(ctx, transport.Cmd{Argv: []string{"python3", "-c", py, "http://" + lab.HubAddr() + path}, Stdin: strings.NewReader(token + "\n")})
	if err != nil {
		t.Fatalf("GET %s on %s: %v %s", path, node.Name, err, res.Stderr)
	}
	return res.Stdout
}

// TestLabHub: in a lab that is up, the hub answers on the management
// network: the real huggingface_hub client downloads the public
// repository on one node; the gated one is downloaded by one node with the
// lab's token (Download) and staged from it to the two others over the
// fabric; every copy is complete and equal. Logs the hub download's and
// the staging's throughput.
func TestLabHub(t *testing.T) {
	dir := os.Getenv("RAYFORM_BENCH_LAB")
	if dir == "" || dir == "netns" {
		t.Skip("RAYFORM_BENCH_LAB is not a lab directory")
	}
	l, err := lab.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	token := l.HubToken()
	if token == "" {
		t.Skip("the lab has no hub")
	}
	base := filepath.Join(dir, "hubtest", strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.RemoveAll(base) })
	peers := labPeers(t, l, base)
	for name, p := range peers {
		p.Layout = HFCacheLayout(filepath.Join(base, name, "hub"), lab.HubRepoBig)
		peers[name] = p
	}
	s1, s2, s3 := peers["spark1"], peers["spark2"], peers["spark3"]

	// The real client, on spark3, the public repository.
	py := hfClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tinyCache := filepath.Join(base, "spark3", "hub")
	res, err := s3.Conn.Run(ctx, transport.Cmd{
		Argv: []string{"python3", "-c", "import sys\nfrom huggingface_hub import snapshot_download\nprint(snapshot_download(sys.argv[1], cache_dir=sys.argv[2]))", lab.HubRepoTiny, tinyCache},
		Env:  map[string]string{"PYTHONPATH": py, "HF_ENDPOINT": "http://" + lab.HubAddr(), "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"},
	})
	if err != nil {
		t.Fatalf("snapshot_download on spark3: %v\n%s", err, res.Stderr)
	}
	tm, err := ParseHubRevision(lab.HubRepoTiny, "main", labHubGet(t, s3, token, "/api/models/"+lab.HubRepoTiny+"/revision/main?blobs=true"))
	if err != nil {
		t.Fatal(err)
	}
	if j := probe(t, tm, HFCacheLayout(tinyCache, lab.HubRepoTiny)); j.State != Complete {
		t.Errorf("the real client's copy on spark3: %s", j)
	}

	// The gated repository: one download, then the fabric.
	m, err := ParseHubRevision(lab.HubRepoBig, "main", labHubGet(t, s1, token, "/api/models/"+lab.HubRepoBig+"/revision/main?blobs=true"))
	if err != nil {
		t.Fatal(err)
	}
	if m, err = Select(m, labHubGet(t, s1, token, "/"+lab.HubRepoBig+"/resolve/"+m.Commit+"/"+IndexFile)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := Download(ctx, m, s1, Hub{Endpoint: "http://" + lab.HubAddr(), Token: token}, StageOptions{}); err != nil {
		t.Fatal(err)
	}
	dl := time.Since(start)
	start = time.Now()
	if err := Stage(ctx, m, s1, []Peer{s2, s3}, StageOptions{}); err != nil {
		t.Fatal(err)
	}
	st := time.Since(start)
	for _, p := range []Peer{s1, s2, s3} {
		if j := probe(t, m, p.Layout); j.State != Complete {
			t.Errorf("%s: %s", p.Name, j)
		}
	}
	sameContent(t, m, s1.Layout, s2.Layout)
	sameContent(t, m, s1.Layout, s3.Layout)
	t.Logf("%s: hub → spark1 %s (%.2f Gbit/s); spark1 → spark2 and spark3 over the fabric %s (%.2f Gbit/s out of spark1)",
		GB(m.Bytes()), dl.Round(time.Millisecond), float64(m.Bytes())*8/dl.Seconds()/1e9, st.Round(time.Millisecond), float64(2*m.Bytes())*8/st.Seconds()/1e9)
}

// nodePeers are the lab's nodes as staging peers as an SSH session sees
// them: commands run as `lab exec NODE` runs them (the node's network,
// hostname and mount namespaces: its own model cache at
// lab.ModelCacheDir), the model in layout of repo there.
func nodePeers(t *testing.T, l *lab.Lab, repo string) map[string]Peer {
	t.Helper()
	peers := map[string]Peer{}
	dir := t.TempDir()
	for _, n := range l.Nodes {
		cmd, err := l.Command(context.Background(), n.Name, "/bin/sh")
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		b.WriteString("#!/bin/sh\nexec env -i")
		for _, kv := range cmd.Env {
			b.WriteString(" " + shell.Quote(kv))
		}
		for _, a := range cmd.Args {
			b.WriteString(" " + shell.Quote(a))
		}
		b.WriteString(" \"$@\"\n")
		w := filepath.Join(dir, "sh-"+n.Name)
		if err := os.WriteFile(w, []byte(b.String()), 0o755); err != nil {
			t.Fatal(err)
		}
		peers[n.Name] = Peer{
			Name:   n.Name,
			Conn:   local.New(local.Options{Host: n.Name, Shell: w}),
			Addr:   netip.MustParseAddr(n.FabricIP),
			Layout: HFCacheLayout(lab.ModelCacheDir, repo),
		}
	}
	return peers
}

// probeOn lists p's copy with observe's real tree probe, run on the node
// (in its mount namespace), and judges it.
func probeOn(t *testing.T, m Manifest, p Peer) Judgment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := p.Conn.Run(ctx, transportCmd(observe.ProbeScript(observe.HostSpec{Trees: []string{p.Layout.Dir}})))
	if err != nil {
		t.Fatalf("probe on %s: %v %s", p.Name, err, res.Stderr)
	}
	f, err := observe.Parse(res.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	return Judge(m, p.Layout, f.Trees[p.Layout.Dir])
}

// TestStageLabSeeded stages the model lab up seeded on the head to the
// other nodes of a lab that is up (RAYFORM_BENCH_LAB=/tmp/rayform-lab-NAME,
// lab up -nodes 3 with the default -model-seed), each node in its own
// model cache at lab.ModelCacheDir as its sessions see it: before, the
// head's copy is complete and the others' absent with the whole size to
// stage; after, every node's copy is complete, each blob with the bytes
// the hub serves (sha256 of each shard as the hub publishes it); the
// copies it made are removed at the end.
func TestStageLabSeeded(t *testing.T) {
	dir := os.Getenv("RAYFORM_BENCH_LAB")
	if dir == "" || dir == "netns" {
		t.Skip("RAYFORM_BENCH_LAB is not a lab directory")
	}
	l, err := lab.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.Seeded == nil || len(l.Nodes) < 2 {
		t.Skip("the lab has no seeded model or one node")
	}
	peers := nodePeers(t, l, l.Seeded.Repo)
	head := peers[l.Seeded.Node]
	m, err := ParseHubRevision(l.Seeded.Repo, "main", labHubGet(t, head, l.HubToken(), "/api/models/"+l.Seeded.Repo+"/revision/main?blobs=true"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Commit != l.Seeded.Commit || m.Bytes() != l.Seeded.Bytes {
		t.Fatalf("the hub's %s is %s, %d bytes; lab.json says %s, %d", m.Repo, m.Commit, m.Bytes(), l.Seeded.Commit, l.Seeded.Bytes)
	}
	if j := probeOn(t, m, head); j.State != Complete {
		t.Fatalf("the head's seeded copy: %s", j)
	}
	var dsts []Peer
	for _, n := range l.Nodes {
		if n.Name == head.Name {
			continue
		}
		p := peers[n.Name]
		if j := probeOn(t, m, p); j.State != Absent || j.NeedBytes != m.Bytes() {
			t.Fatalf("%s before staging: %s (need %d), want absent with %d to stage", n.Name, j, j.NeedBytes, m.Bytes())
		}
		dsts = append(dsts, p)
		node := n
		t.Cleanup(func() {
			_ = os.RemoveAll(filepath.Join(node.ModelCacheHostDir(), "hub", CacheDirName(m.Repo)))
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rec recorder
	if err := Stage(ctx, m, head, dsts, StageOptions{Progress: rec.add, Interval: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Nodes {
		p := peers[n.Name]
		if j := probeOn(t, m, p); j.State != Complete {
			t.Errorf("%s after staging: %s", n.Name, j)
		}
		if n.Name == head.Name {
			continue
		}
		if ps := rec.by[n.Name]; len(ps) == 0 || !ps[len(ps)-1].Finished || ps[len(ps)-1].Done != m.Bytes() {
			t.Errorf("%s progress %+v", n.Name, ps)
		}
		for _, f := range m.Files {
			b, err := os.ReadFile(filepath.Join(n.ModelCacheHostDir(), "hub", CacheDirName(m.Repo), "snapshots", m.Commit, f.Path))
			if err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
			sum := sha256.Sum256(b)
			if int64(len(b)) != f.Size || (f.SHA256 != "" && hex.EncodeToString(sum[:]) != f.SHA256) {
				t.Errorf("%s %s: %d bytes, sha256 %x; the hub has %d, %s", n.Name, f.Path, len(b), sum, f.Size, f.SHA256)
			}
		}
	}
}
