package dataplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
	"github.com/rayform/rayform/resources/diagnose"
)

// A rank's output as check.py prints it (torch 1.13, two nodes of the lab).
const healthyOut = `W1201 12:40:01.000000 1 socket.cpp:558] [c10d] some unrelated warning
RAYFORM_CHECK {"backends": {"gloo": {"addr": "192.168.200.13", "algbw_gbps": 0.3, "busbw_gbps": 0.3, "bytes": 8388608, "connections": 1, "iface": "enp1s0f1np1", "iters": 5, "ok": true, "peers": ["192.168.200.12"], "time_s": 0.027}}, "elapsed_s": 4.7, "env": {"GLOO_SOCKET_IFNAME": "enp1s0f1np1"}, "import_s": 3.4, "link": {"iface": "enp1s0f1np1", "speed_mbps": 10000}, "master": "192.168.200.12:29417", "node": "spark2", "ok": true, "phase": "done", "rank": 1, "rendezvous_s": 1.06, "store_s": 1.0, "torch": "1.13.0a0", "version": 1, "world_size": 2}
`

func TestParseResult(t *testing.T) {
	r, err := ParseResult([]byte(healthyOut))
	if err != nil {
		t.Fatal(err)
	}
	g := r.Backends["gloo"]
	if !r.OK || r.Rank != 1 || r.RendezvousS != 1.06 || g == nil || g.Iface != "enp1s0f1np1" || g.BusBWGBps != 0.3 || *r.Link.SpeedMbps != 10000 {
		t.Errorf("parsed %+v (gloo %+v)", r, g)
	}
	for _, bad := range []string{"", "Traceback ...\n", "RAYFORM_CHECK {not json\n"} {
		if _, err := ParseResult([]byte(bad)); err == nil {
			t.Errorf("ParseResult(%q) = nil error", bad)
		}
	}
}

func report(t *testing.T, addr string, outs ...string) *Report {
	t.Helper()
	rep := &Report{Port: 29417, Master: netip.MustParseAddr("192.168.200.12")}
	for i, out := range outs {
		n := NodeReport{Node: []string{"spark1", "spark2"}[i], Addr: netip.MustParseAddr(addr), Iface: "enp1s0f1np1", Output: []byte(out)}
		n.Result, _ = ParseResult([]byte(out))
		rep.Nodes = append(rep.Nodes, n)
	}
	return rep
}

func TestProblems(t *testing.T) {
	moved := strings.ReplaceAll(healthyOut, `"addr": "192.168.200.13"`, `"addr": "192.168.200.23"`)
	slow := strings.ReplaceAll(healthyOut, `"busbw_gbps": 0.3`, `"busbw_gbps": 0.01`)
	failed := `RAYFORM_CHECK {"ok": false, "rank": 1, "world_size": 2, "phase": "rendezvous", "error": "TimeoutError: The client socket has timed out after 15s while trying to connect to (192.168.200.12, 29417)."}` + "\n"
	for _, tc := range []struct {
		name, addr, out string
		want            string // "" for none
		warning, ok     bool
	}{
		{"healthy", "192.168.200.13", healthyOut, "", false, true},
		{"moved", "192.168.200.13", moved, "spark1: Gloo used 192.168.200.23 (enp1s0f1np1), not the node's fabric address 192.168.200.13", false, false},
		{"slow", "192.168.200.13", slow, "Gloo bus bandwidth 0.010 GB/s is 0.8% of the enp1s0f1np1 link speed of 10 Gb/s", true, true},
		{"failed", "192.168.200.13", failed, "spark1: the c10d rendezvous failed: TimeoutError: The client socket has timed out", false, false},
		{"no python", "192.168.200.13", `OCI runtime exec failed: exec failed: unable to start container process: exec: "python3": executable file not found in $PATH: unknown`, "spark1: the check did not run: the image has no python3", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := report(t, tc.addr, tc.out)
			ps := rep.Problems()
			if rep.OK() != tc.ok {
				t.Errorf("OK() = %v, want %v; problems %+v", rep.OK(), tc.ok, ps)
			}
			if tc.want == "" {
				if len(ps) != 0 {
					t.Errorf("problems %+v, want none", ps)
				}
				return
			}
			if len(ps) != 1 || !strings.Contains(ps[0].Text, tc.want) || ps[0].Warning != tc.warning {
				t.Errorf("problems %+v, want one (warning %v) containing %q", ps, tc.warning, tc.want)
			}
			tbl := rep.Table()
			if !strings.HasPrefix(tbl, "NODE ") || !strings.Contains(tbl, "spark1") {
				t.Errorf("table:\n%s", tbl)
			}
		})
	}
}

func TestTable(t *testing.T) {
	rep := report(t, "192.168.200.13", healthyOut)
	got := rep.Table()
	for _, want := range []string{"BACKEND", "RENDEZVOUS", "BUSBW", "LINK",
		"spark1  gloo     192.168.200.13  enp1s0f1np1  1.06 s      0.300 GB/s  10 Gb/s  ok"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// torchPython returns a python3 that imports torch.distributed with Gloo
// (Debian's python3-torch), or skips.
func torchPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import torch.distributed as d; assert d.is_gloo_available()").Run() == nil {
			return path
		}
	}
	t.Skip("no python3 with torch (apt-get install python3-torch)")
	return ""
}

// TestCheckLoopback runs the embedded script through Run: two ranks on this
// machine over loopback, real torch c10d and Gloo.
func TestCheckLoopback(t *testing.T) {
	py := torchPython(t)
	t.Setenv("GLOO_SOCKET_IFNAME", "lo")
	lo := netip.MustParseAddr("127.0.0.1")
	nodes := []Node{
		{Name: "a", Conn: local.New(local.Options{Host: "a"}), Addr: lo, Iface: "lo"},
		{Name: "b", Conn: local.New(local.Options{Host: "b"}), Addr: lo, Iface: "lo"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep := Run(ctx, nodes, Options{Python: py, Timeout: 30 * time.Second, SizeMiB: 1, Iters: 2})
	for _, n := range rep.Nodes {
		if n.Result == nil || !n.Result.OK {
			t.Fatalf("%s: %v\n%s", n.Node, n.Err, n.Output)
		}
		g := n.Result.Backends["gloo"]
		if g == nil || g.Addr != "127.0.0.1" || g.Iface != "lo" || g.BusBWGBps <= 0 || g.Connections < 1 {
			t.Errorf("%s: gloo %+v", n.Node, g)
		}
		if n.Result.RendezvousS <= 0 || n.Result.WorldSize != 2 {
			t.Errorf("%s: result %+v", n.Node, n.Result)
		}
	}
	if !rep.OK() {
		t.Errorf("problems: %+v", rep.Problems())
	}
	t.Logf("\n%s", rep.Table())
}

// TestCheckStandaloneFailsFast runs check.py as the lead runs it on a GPU
// machine (python3 check.py, settings from the environment): a
// GLOO_SOCKET_IFNAME that names no interface fails at once with Gloo's own
// text, which diagnose classifies.
func TestCheckStandaloneFailsFast(t *testing.T) {
	py := torchPython(t)
	cmd := exec.Command(py, filepath.Join(".", "check.py"), "--timeout", "20")
	cmd.Env = append(os.Environ(), "RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29499", "GLOO_SOCKET_IFNAME=rfnosuch0")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1\n%s", err, out)
	}
	r, perr := ParseResult(out)
	if perr != nil || r.OK || r.Phase != "gloo" || !strings.Contains(r.Error, "Unable to find address for: rfnosuch0") {
		t.Fatalf("result %+v (%v)\n%s", r, perr, out)
	}
	rep := &Report{Nodes: []NodeReport{{Node: "spark1", Output: out, Result: r}}}
	d := diagnose.Classify(diagnose.Input{Logs: rep.Logs()})
	if d.Cause != diagnose.GlooInterface || !strings.Contains(d.Title, "rfnosuch0") {
		t.Errorf("diagnosis %s: %s", d.Cause, d.Title)
	}
}

func TestScriptIsEmbedded(t *testing.T) {
	disk, err := os.ReadFile("check.py")
	if err != nil {
		t.Fatal(err)
	}
	if string(disk) != string(Script) || !strings.Contains(string(Script), ResultPrefix) {
		t.Error("Script is not check.py")
	}
}

// TestRunPicksAnotherPort: the head's rank cannot bind the rendezvous port
// (something listens there): the others are cancelled before the
// rendezvous and the check runs again on another port, never one of the
// head's busy ports.
func TestRunPicksAnotherPort(t *testing.T) {
	a := &rankConn{host: "spark1", calls: []string{"port-in-use", "ready"}}
	b := &rankConn{host: "spark2", calls: []string{"ready"}}
	var busy []int
	for p := PortMin; p <= PortMax-10; p++ {
		busy = append(busy, p)
	}
	nodes := []Node{
		{Name: "spark1", Conn: a, Container: "c", Busy: busy},
		{Name: "spark2", Conn: b, Container: "c"},
	}
	rep := Run(context.Background(), nodes, Options{})
	if len(a.ports) != 2 || len(b.ports) != 2 || a.ports[0] == a.ports[1] || a.ports[1] != b.ports[1] || a.ports[1] != fmt.Sprint(rep.Port) {
		t.Fatalf("ports: head %v, worker %v, report %d", a.ports, b.ports, rep.Port)
	}
	for _, p := range a.ports {
		if n, _ := strconv.Atoi(p); n <= PortMax-10 {
			t.Errorf("port %s is one of the head's busy ports", p)
		}
	}
	if !rep.OK() {
		t.Errorf("second attempt: %+v", rep.Problems())
	}
}

// rankConn plays one rank per Run call: the behaviour of call i is
// calls[i], or the last one ("ready": ready, then go or cancelled; "dies":
// exits before ready, as a rank whose container was replaced;
// "port-in-use": the head cannot bind the rendezvous port; "hangs": never
// ready, as a rank stuck importing torch). It records
// each call's master port and what its stdin brought after the ready line.
type rankConn struct {
	host     string
	calls    []string
	launched chan struct{} // receives a value as each call starts
	mu       sync.Mutex
	ports    []string
	got      []string // "go" or "eof", per call that reached ready
}

func (c *rankConn) Host() string { return c.host }
func (c *rankConn) Upload(context.Context, string, []byte, uint32) error {
	return errors.New("no upload")
}
func (c *rankConn) Stats() transport.Stats { return transport.Stats{} }
func (c *rankConn) Close() error           { return nil }

func (c *rankConn) Run(ctx context.Context, cmd transport.Cmd) (transport.Result, error) {
	port, rank := "", ""
	for i, a := range cmd.Argv {
		switch a {
		case "--master-port":
			port = cmd.Argv[i+1]
		case "--rank":
			rank = cmd.Argv[i+1]
		}
	}
	c.mu.Lock()
	c.ports = append(c.ports, port)
	call := c.calls[min(len(c.ports), len(c.calls))-1]
	c.mu.Unlock()
	if c.launched != nil {
		c.launched <- struct{}{}
	}
	if _, err := io.ReadFull(cmd.Stdin, make([]byte, len(Script))); err != nil {
		return transport.Result{}, err
	}
	fail := func(out string, code int) (transport.Result, error) {
		res := transport.Result{ExitCode: code, Stdout: []byte(out)}
		return res, &transport.ExitError{Host: c.host, Cmd: cmd.String(), Result: res}
	}
	switch call {
	case "hangs":
		_, _ = io.Copy(io.Discard, cmd.Stdin) // never ready: waits until its input ends
		return fail(`RAYFORM_CHECK {"ok": false, "rank": `+rank+`, "phase": "import", "error": "cancelled"}`+"\n", 3)
	case "dies":
		return fail("Error response from daemon: container 5a1b is not running\n", 126)
	case "port-in-use":
		return fail(`RAYFORM_CHECK {"ok": false, "rank": 0, "phase": "rendezvous", "error": "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to 0.0.0.0:`+port+` (errno: 98 - Address already in use)."}`+"\n", 1)
	}
	fmt.Fprintln(cmd.Stdout, ReadyLine)
	line, _ := bufio.NewReader(cmd.Stdin).ReadString('\n')
	c.mu.Lock()
	c.got = append(c.got, map[bool]string{true: "go", false: "eof"}[line == "go\n"])
	c.mu.Unlock()
	if line != "go\n" {
		return fail(`RAYFORM_CHECK {"ok": false, "rank": `+rank+`, "phase": "ready", "error": "cancelled"}`+"\n", 3)
	}
	return transport.Result{Stdout: []byte(strings.ReplaceAll(healthyOut, `"rank": 1`, `"rank": `+rank))}, nil
}

// TestSessionStartedAhead: a rank launched ahead (as its container starts)
// runs before the check is asked for; Finish launches the rest, sends "go"
// to all on one port, and reports the run as started ahead. Launching a
// rank twice, or a container that is not the rank's, starts nothing.
func TestSessionStartedAhead(t *testing.T) {
	a := &rankConn{host: "spark1", calls: []string{"ready"}, launched: make(chan struct{}, 4)}
	b := &rankConn{host: "spark2", calls: []string{"ready"}, launched: make(chan struct{}, 4)}
	nodes := []Node{{Name: "spark1", Conn: a, Container: "c"}, {Name: "spark2", Conn: b, Container: "c"}}
	s := Start(context.Background(), nodes, Options{})
	s.Launch("spark1", "c")
	s.Launch("spark1", "c")
	s.Launch("spark2", "other")
	<-a.launched
	if len(b.launched) != 0 {
		t.Fatal("spark2's rank started before its container did or the check was asked for")
	}
	rep := Finish(context.Background(), s, nodes, Options{})
	if !rep.OK() || !rep.Ahead || rep.Ready <= 0 || rep.Added > rep.Elapsed {
		t.Fatalf("report: ok %v ahead %v ready %v added %v elapsed %v: %+v", rep.OK(), rep.Ahead, rep.Ready, rep.Added, rep.Elapsed, rep.Problems())
	}
	if len(a.ports) != 1 || len(b.ports) != 1 || a.ports[0] != b.ports[0] || a.ports[0] != fmt.Sprint(rep.Port) {
		t.Errorf("ranks ran %v and %v, report port %d: want one run each on one port", a.ports, b.ports, rep.Port)
	}
	if !strings.Contains(rep.Timing(), "ranks started with the containers") {
		t.Errorf("timing: %s", rep.Timing())
	}
}

// TestSessionStartedAheadRankDied: a rank launched ahead ends before it is
// ready (its container was replaced after it started): the session is
// thrown away, its other ranks are cancelled, and the check runs anew.
func TestSessionStartedAheadRankDied(t *testing.T) {
	a := &rankConn{host: "spark1", calls: []string{"ready", "ready"}}
	b := &rankConn{host: "spark2", calls: []string{"dies", "ready"}}
	nodes := []Node{{Name: "spark1", Conn: a, Container: "c"}, {Name: "spark2", Conn: b, Container: "c"}}
	s := Start(context.Background(), nodes, Options{})
	s.Launch("spark1", "c")
	s.Launch("spark2", "c")
	rep := Finish(context.Background(), s, nodes, Options{})
	if !rep.OK() || rep.Ahead {
		t.Fatalf("report: ok %v ahead %v: %+v", rep.OK(), rep.Ahead, rep.Problems())
	}
	if len(a.ports) != 2 || len(b.ports) != 2 || a.ports[0] == a.ports[1] {
		t.Errorf("ranks ran on %v and %v: want a second run on another port", a.ports, b.ports)
	}
	if want := []string{"eof", "go"}; !slices.Equal(a.got, want) {
		t.Errorf("the head's rank read %v: want its first run cancelled, its second started", a.got)
	}
}

// TestSessionClose: Close cancels the ranks of a check nobody finished
// (the apply stopped before the serve): they read end of input, not "go".
func TestSessionClose(t *testing.T) {
	a := &rankConn{host: "spark1", calls: []string{"ready"}, launched: make(chan struct{}, 1)}
	nodes := []Node{{Name: "spark1", Conn: a, Container: "c"}, {Name: "spark2", Conn: a, Container: "d"}}
	s := Start(context.Background(), nodes, Options{})
	s.Launch("spark1", "c")
	<-a.launched
	s.Close()
	if !slices.Equal(a.got, []string{"eof"}) || len(a.ports) != 1 {
		t.Errorf("after Close: runs %v, stdin %v; want one run, cancelled", a.ports, a.got)
	}
}

// TestSessionStartedAheadWaitsImportTimeout: a rank started ahead that
// never gets ready holds the check step for the caller's ImportTimeout
// (plus the transport's slack), not for the longer timeout its process got
// to cover the cluster's start: the check fails with the rank not ready
// and every rank is cancelled.
func TestSessionStartedAheadWaitsImportTimeout(t *testing.T) {
	a := &rankConn{host: "spark1", calls: []string{"ready"}}
	b := &rankConn{host: "spark2", calls: []string{"hangs"}}
	nodes := []Node{{Name: "spark1", Conn: a, Container: "c"}, {Name: "spark2", Conn: b, Container: "c"}}
	o := Options{ImportTimeout: 100 * time.Millisecond}
	s := Start(context.Background(), nodes, o)
	s.Launch("spark2", "c")
	// The guard is far below AheadWait and far above ImportTimeout + slack.
	ctx, cancel := context.WithTimeout(context.Background(), AheadWait/5)
	defer cancel()
	rep := Finish(ctx, s, nodes, o)
	if ctx.Err() != nil {
		t.Fatalf("Finish waited past %s for a rank that never got ready", AheadWait/5)
	}
	if rep.OK() || rep.Ready != 0 || !rep.Ahead {
		t.Errorf("report: ok %v ready %v ahead %v; want a failed check started ahead, not every rank ready", rep.OK(), rep.Ready, rep.Ahead)
	}
	if !slices.Equal(a.got, []string{"eof"}) {
		t.Errorf("the head's rank read %v; want it cancelled", a.got)
	}
}
