package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/diagnose"
)

// Defaults of Options.
const (
	DefaultTimeout = 15 * time.Second
	DefaultSizeMiB = 8.0
	DefaultIters   = 5
	// DefaultImportTimeout is generous: torch's import alone takes seconds
	// per process, more with many processes on few cores.
	DefaultImportTimeout = 2 * time.Minute
	// slack is added to the script's own deadline for the SSH session and
	// docker exec around it.
	slack = 15 * time.Second
)

// Bandwidth below these shares of the link speed is a warning. Gloo runs
// its reduction on the CPU and rarely fills a fast link; NCCL should.
const (
	LowShareGloo = 0.05
	LowShareNCCL = 0.25
)

// Options tune one run.
type Options struct {
	// Port is the rendezvous port on the head; 0 draws one with PickPort.
	Port int
	// Timeout bounds the rendezvous and each collective (the script exits
	// by itself after 3 x Timeout); default DefaultTimeout.
	Timeout time.Duration
	// SizeMiB is the all_reduce buffer; default DefaultSizeMiB.
	SizeMiB float64
	// Iters is the number of timed all_reduce calls; default DefaultIters.
	Iters int
	// Backends is check.py's --backends; default "auto" (Gloo, plus NCCL
	// where CUDA is available).
	Backends string
	// ImportTimeout bounds a rank's start: docker exec, python and the
	// import of torch; default DefaultImportTimeout.
	ImportTimeout time.Duration
	// Python is the interpreter inside the container; default "python3".
	Python string
	// Env is added to every rank's environment (docker exec -e), over the
	// container's own: to try a setting before pinning it.
	Env map[string]string
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.SizeMiB <= 0 {
		o.SizeMiB = DefaultSizeMiB
	}
	if o.Iters <= 0 {
		o.Iters = DefaultIters
	}
	if o.Backends == "" {
		o.Backends = "auto"
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.ImportTimeout <= 0 {
		o.ImportTimeout = DefaultImportTimeout
	}
	return o
}

// Node is one rank: where its Ray container runs (Container "" runs on the
// host itself) and the fabric address and interface rayform expects its
// data plane to use.
type Node struct {
	Name      string
	Conn      transport.Conn
	Container string
	Addr      netip.Addr
	Iface     string
	// Busy are ports this node's Ray and vLLM listen on; the rendezvous
	// port (on the head, nodes[0]) is never one of them.
	Busy []int
}

// NodeReport is one rank's outcome.
type NodeReport struct {
	Node   string
	Addr   netip.Addr // expected fabric address
	Iface  string     // expected fabric interface
	Result *Result    // nil when no result line came back
	Output []byte     // stdout then stderr of the process (its backends' own lines)
	Err    error      // the command's error, if any
}

// Report is the outcome of one run.
type Report struct {
	Master netip.Addr
	Port   int
	Nodes  []NodeReport
	// Ready is when every rank had imported torch, counted from the first
	// rank's launch (0 when not all did); Elapsed is the whole run.
	Ready   time.Duration
	Elapsed time.Duration
	// Ahead is set when the ranks were launched ahead of the check, as the
	// containers started; Waited is how long the check then still waited
	// for them to be ready, and Added the time the check itself took, from
	// the moment it was asked for (for a check not started ahead, Elapsed).
	Ahead  bool
	Waited time.Duration
	Added  time.Duration
	// endedEarly: a rank ended before every rank was ready.
	endedEarly bool
}

// bootstrap is the python program of the command line: it reads check.py
// (its size is the first argument) from stdin and runs it, leaving the rest
// of stdin for the "go" line.
const bootstrap = `import sys; n = int(sys.argv.pop(1)); exec(compile(sys.stdin.buffer.read(n), "check.py", "exec"), {"__name__": "__main__"})`

// ReadyLine is what a rank run with --ready-go prints once torch is
// imported; it then waits for "go" on stdin.
const ReadyLine = "RAYFORM_CHECK_READY"

// Command returns the command that runs rank on node: a bootstrap that
// reads check.py from stdin, in the container's python (docker exec -i, so
// the container's own environment applies), with NCCL_DEBUG=INFO so that
// NCCL names the interface it uses, and --ready-go. A node without a
// container runs python on the host, under env NAME=VALUE arguments. The
// caller feeds Script then "go\n" (Run does).
func Command(n Node, rank, world int, master netip.Addr, port int, o Options) transport.Cmd {
	o = o.withDefaults()
	env := []string{"NCCL_DEBUG=INFO", "RAYFORM_CHECK_NODE=" + n.Name}
	if n.Iface != "" {
		env = append(env, "RAYFORM_CHECK_IFACE="+n.Iface)
	}
	for _, k := range slices.Sorted(maps.Keys(o.Env)) {
		env = append(env, k+"="+o.Env[k])
	}
	var argv []string
	if n.Container != "" {
		argv = []string{"docker", "exec", "-i"}
		for _, e := range env {
			argv = append(argv, "-e", e)
		}
		argv = append(argv, n.Container)
	} else {
		argv = append([]string{"env"}, env...)
	}
	argv = append(argv, o.Python, "-c", bootstrap, fmt.Sprint(len(Script)), "--ready-go",
		"--import-timeout", fmt.Sprint(o.ImportTimeout.Seconds()))
	argv = append(argv, Args(rank, world, master, port, o)...)
	return transport.Cmd{Argv: argv, Timeout: o.ImportTimeout + 3*o.Timeout + slack}
}

// readyWatch is a rank's stdout as it arrives: it closes ready when the
// rank prints ReadyLine.
type readyWatch struct {
	mu    sync.Mutex
	buf   []byte
	once  sync.Once
	ready chan struct{}
}

func (w *readyWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if bytes.Contains(w.buf, []byte(ReadyLine)) {
		w.once.Do(func() { close(w.ready) })
		w.buf = nil
	} else if len(w.buf) > 4096 {
		w.buf = w.buf[len(w.buf)-len(ReadyLine):]
	}
	return len(p), nil
}

// Run runs the check (Finish without ranks started ahead).
func Run(ctx context.Context, nodes []Node, o Options) *Report { return Finish(ctx, nil, nodes, o) }

// Finish completes the check: it finishes s, whose ranks were started
// ahead of time (see [Start]), or runs a new session when s is nil. A
// session started ahead in which a rank ended before every rank was ready
// (its container was replaced meanwhile) is thrown away and the check runs
// anew. When the head could not bind the rendezvous port (something else
// listens there) the check runs again on another port, up to twice.
func Finish(ctx context.Context, s *Session, nodes []Node, o Options) *Report {
	var avoid []int
	if len(nodes) > 0 {
		avoid = append(avoid, nodes[0].Busy...)
	}
	if s != nil {
		rep := s.finish(ctx)
		if !rep.endedEarly && !rep.portInUse() {
			return rep
		}
		avoid = append(avoid, s.o.Port)
		o.Port = 0
	}
	for attempt := 0; ; attempt++ {
		oo := o
		if oo.Port == 0 {
			oo.Port = PickPort(avoid...)
		}
		rep := newSession(ctx, nodes, oo, false).finish(ctx)
		if attempt == 2 || o.Port != 0 || !rep.portInUse() {
			return rep
		}
		avoid = append(avoid, oo.Port)
	}
}

// portInUse reports whether the head's rank failed to bind the rendezvous
// port.
func (r *Report) portInUse() bool { return len(r.Nodes) > 0 && r.Nodes[0].portInUse() }

// portInUse reports whether the rank failed to bind the rendezvous port.
func (n NodeReport) portInUse() bool {
	return n.Result != nil && !n.Result.OK && strings.Contains(n.Result.Error, "Address already in use")
}

// AheadWait is how long a rank started ahead of time ([Start]) waits for
// "go" on top of its import: the rest of the cluster's start, Ray's node
// table included.
const AheadWait = 10 * time.Minute

// Session is one run of the check: one rank per node, nodes[0] (the head)
// serving the rendezvous on its fabric address. Every rank imports torch
// first and reports ready; once all are, the session sends "go" to each, so
// that the rendezvous starts on every node at once and its timeout does not
// count the imports. Ranks can be launched one by one ahead of time (as
// each node's container starts), so that importing torch overlaps the rest
// of the cluster's start.
type Session struct {
	ctx    context.Context
	cancel context.CancelFunc
	nodes  []Node
	o      Options
	ahead  bool
	// wait bounds how long finish waits for the ranks to be ready, from
	// the moment it is called: the caller's ImportTimeout, also for ranks
	// started ahead (whose own timeout counts the cluster's start too).
	wait  time.Duration
	start time.Time
	ended chan struct{} // one value per rank that ended

	mu    sync.Mutex
	ranks []*rankRun
	reps  []NodeReport
	wg    sync.WaitGroup
}

// rankRun is one launched rank.
type rankRun struct {
	ready   chan struct{}
	control *io.PipeWriter
	done    chan struct{}
}

// Start returns a session whose ranks are launched ahead of the check with
// Launch; Finish completes it. The session's processes live until Finish
// or Close, within ctx.
func Start(ctx context.Context, nodes []Node, o Options) *Session {
	if o.Port == 0 {
		var avoid []int
		if len(nodes) > 0 {
			avoid = nodes[0].Busy
		}
		o.Port = PickPort(avoid...)
	}
	return newSession(ctx, nodes, o, true)
}

func newSession(ctx context.Context, nodes []Node, o Options, ahead bool) *Session {
	o = o.withDefaults()
	wait := o.ImportTimeout
	if ahead {
		o.ImportTimeout += AheadWait
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Session{ctx: ctx, cancel: cancel, nodes: nodes, o: o, ahead: ahead, wait: wait, start: time.Now(),
		ended: make(chan struct{}, len(nodes)), ranks: make([]*rankRun, len(nodes)), reps: make([]NodeReport, len(nodes))}
}

// Launch starts the rank on the node named node in container (one that is
// not the node's rank's container is ignored), once.
func (s *Session) Launch(node, container string) {
	for i, n := range s.nodes {
		if n.Name == node && n.Container == container {
			s.launch(i)
		}
	}
}

// launch starts rank i unless it runs already.
func (s *Session) launch(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ranks[i] != nil {
		return
	}
	n := s.nodes[i]
	rr := &rankRun{done: make(chan struct{})}
	s.ranks[i] = rr
	nr := NodeReport{Node: n.Name, Addr: n.Addr, Iface: n.Iface}
	if n.Conn == nil {
		nr.Err = fmt.Errorf("%s: no connection", n.Name)
		s.reps[i] = nr
		close(rr.done)
		s.ended <- struct{}{}
		return
	}
	watch := &readyWatch{ready: make(chan struct{})}
	rr.ready = watch.ready
	pr, pw := io.Pipe()
	rr.control = pw
	cmd := Command(n, i, len(s.nodes), s.nodes[0].Addr, s.o.Port, s.o)
	cmd.Stdin = io.MultiReader(bytes.NewReader(Script), pr)
	cmd.Stdout = watch
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res, err := n.Conn.Run(s.ctx, cmd)
		pr.Close()
		nr.Output = append(append([]byte{}, res.Stdout...), res.Stderr...)
		nr.Result, _ = ParseResult(res.Stdout)
		nr.Err = err
		s.mu.Lock()
		s.reps[i] = nr
		s.mu.Unlock()
		close(rr.done)
		s.ended <- struct{}{}
	}()
}

// finish launches the ranks not launched yet, waits until every rank is
// ready (at most the caller's ImportTimeout from now), sends "go" to each, or cancels them all
// when a rank ended first, and waits for every process. Every process is
// bounded by its own deadline.
func (s *Session) finish(ctx context.Context) *Report {
	defer s.cancel()
	rep := &Report{Port: s.o.Port, Nodes: s.reps, Ahead: s.ahead}
	if len(s.nodes) == 0 {
		return rep
	}
	rep.Master = s.nodes[0].Addr
	asked := time.Now()
	for i := range s.nodes {
		s.launch(i)
	}
	ready := make(chan struct{})
	go func() {
		for _, r := range s.ranks {
			if r.ready == nil {
				return // a rank without a connection: it ended already
			}
			select {
			case <-r.ready:
			case <-s.ctx.Done():
				return
			}
		}
		close(ready)
	}()
	timer := time.NewTimer(s.wait + slack)
	defer timer.Stop()
	startLine := "go\n"
	select {
	case <-ready:
	case <-s.ended:
		startLine = "" // a rank ended before the rendezvous: cancel the others
		rep.endedEarly = true
	case <-timer.C:
		startLine = ""
	case <-ctx.Done():
		startLine = ""
	}
	if startLine != "" {
		rep.Ready = time.Since(s.start)
		rep.Waited = time.Since(asked)
	}
	s.signal(startLine)
	s.wg.Wait()
	rep.Elapsed = time.Since(s.start)
	rep.Added = time.Since(asked)
	s.mu.Lock()
	rep.Nodes = append([]NodeReport(nil), s.reps...)
	s.mu.Unlock()
	return rep
}

// signal writes line ("" for none) to every rank's stdin and closes it:
// a rank that reads end of input instead of "go" exits, cancelled.
func (s *Session) signal(line string) {
	for _, r := range s.ranks {
		if r != nil && r.control != nil {
			go func() {
				if line != "" {
					_, _ = io.WriteString(r.control, line)
				}
				r.control.Close()
			}()
		}
	}
}

// Close cancels the session's ranks: their input ends (a rank still
// importing torch exits as soon as it reads it, instead of "go") and their
// commands are cancelled, without waiting for the import; it returns once
// every command returned. It is a no-op after Finish.
func (s *Session) Close() {
	s.mu.Lock()
	ranks := slices.Clone(s.ranks)
	s.mu.Unlock()
	for _, r := range ranks {
		if r != nil && r.control != nil {
			r.control.Close()
		}
	}
	s.cancel()
	s.wg.Wait()
}

// Problem is a failure, or a warning, found in a report.
type Problem struct {
	Node    string `json:"node"`
	Backend string `json:"backend,omitempty"` // "gloo" or "nccl" when the problem is one backend's
	Warning bool   `json:"warning"`
	Text    string `json:"text"`
}

// Problems lists what went wrong, node by node: a rank without a result, a
// failed rank (its phase and torch's error), a backend whose connections
// used another address than the node's fabric address, and (warnings)
// bandwidth far below the link speed.
func (r *Report) Problems() []Problem {
	var ps []Problem
	fail := func(node, backend, format string, args ...any) {
		ps = append(ps, Problem{Node: node, Backend: backend, Text: fmt.Sprintf(format, args...)})
	}
	for _, n := range r.Nodes {
		res := n.Result
		switch {
		case res == nil:
			fail(n.Node, "", "%s: the check did not run: %s", n.Node, noResult(n))
			continue
		case !res.OK:
			fail(n.Node, "", "%s: %s failed: %s", n.Node, phaseName(res.Phase), errorText(res.Error))
			continue
		}
		for _, name := range backendOrder(res.Backends) {
			b := res.Backends[name]
			if n.Addr.IsValid() && b.Addr != "" && b.Addr != n.Addr.String() {
				fail(n.Node, name, "%s: %s used %s%s, not the node's fabric address %s (the address Ray and vLLM were given: VLLM_HOST_IP, --node-ip-address)",
					n.Node, backendName(name), b.Addr, ifaceSuffix(b.Iface), n.Addr)
			} else if n.Iface != "" && b.Iface != "" && b.Iface != n.Iface {
				fail(n.Node, name, "%s: %s used interface %s, not the fabric interface %s", n.Node, backendName(name), b.Iface, n.Iface)
			} else if pinned := res.Env["VLLM_HOST_IP"]; pinned != "" && b.Addr != "" && b.Addr != pinned {
				fail(n.Node, name, "%s: %s used %s%s, but the container was started with VLLM_HOST_IP=%s (the address Ray registered the node under): the fabric address moved since",
					n.Node, backendName(name), b.Addr, ifaceSuffix(b.Iface), pinned)
			}
			if res.Link != nil && res.Link.SpeedMbps != nil && b.BusBWGBps > 0 && res.WorldSize > 1 {
				link := float64(*res.Link.SpeedMbps) / 8000 // GB/s
				share := LowShareGloo
				if name == "nccl" {
					share = LowShareNCCL
				}
				if b.BusBWGBps < share*link {
					ps = append(ps, Problem{Node: n.Node, Backend: name, Warning: true, Text: fmt.Sprintf(
						"%s: %s bus bandwidth %.3f GB/s is %.1f%% of the %s link speed of %s (%s); below %.0f%% points at a slow path (a fallback interface, a lower link rate, a congested or misconfigured fabric)",
						n.Node, backendName(name), b.BusBWGBps, 100*b.BusBWGBps/link, res.Link.Iface, speed(*res.Link.SpeedMbps), gbps(link), 100*share)})
				}
			}
		}
	}
	return ps
}

// errorText is torch's error without the C++ stack it carries (the
// "Exception raised from ..." line and its "frame #N:" lines), which names
// no cause and would bury the one line that does.
func errorText(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "frame #") || strings.HasPrefix(t, "Exception raised from ") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// Timing is one line on where the time went: the start of every rank
// (docker exec, python, importing torch), then the rendezvous and the
// collectives.
func (r *Report) Timing() string {
	switch {
	case r.Ready <= 0:
		return fmt.Sprintf("%.1fs", r.Added.Seconds())
	case r.Ahead:
		return fmt.Sprintf("%.1fs: ranks started with the containers %.1fs earlier, torch imported on every node after %.1fs (%.1fs of it waited for here), rendezvous and all_reduce %.1fs",
			r.Added.Seconds(), (r.Elapsed - r.Added).Seconds(), r.Ready.Seconds(), r.Waited.Seconds(), (r.Elapsed - r.Ready).Seconds())
	}
	return fmt.Sprintf("%.1fs: torch imported on every node after %.1fs, rendezvous and all_reduce %.1fs", r.Added.Seconds(), r.Ready.Seconds(), (r.Elapsed - r.Ready).Seconds())
}

// OK reports whether the report has no failure (warnings allowed).
func (r *Report) OK() bool {
	for _, p := range r.Problems() {
		if !p.Warning {
			return false
		}
	}
	return true
}

func noResult(n NodeReport) string {
	out := string(n.Output)
	switch {
	case strings.Contains(out, `"python3": executable file not found`) || strings.Contains(out, "python3: not found") ||
		strings.Contains(out, "python3: No such file"):
		return "the image has no python3"
	case n.Err != nil:
		return n.Err.Error()
	}
	return "no result line in its output"
}

func phaseName(p string) string {
	switch p {
	case "import":
		return "importing torch"
	case "ready":
		return "waiting for the other nodes"
	case "rendezvous":
		return "the c10d rendezvous"
	case "gloo":
		return "Gloo"
	case "nccl":
		return "NCCL"
	}
	return "the check (" + p + ")"
}

func backendName(b string) string {
	switch b {
	case "gloo":
		return "Gloo"
	case "nccl":
		return "NCCL"
	}
	return b
}

func backendOrder(m map[string]*Backend) []string {
	var out []string
	for _, k := range []string{"gloo", "nccl"} {
		if m[k] != nil {
			out = append(out, k)
		}
	}
	return out
}

func ifaceSuffix(i string) string {
	if i == "" {
		return ""
	}
	return " (" + i + ")"
}

func speed(mbps int) string {
	if mbps >= 1000 && mbps%1000 == 0 {
		return fmt.Sprintf("%d Gb/s", mbps/1000)
	}
	return fmt.Sprintf("%d Mb/s", mbps)
}

func gbps(v float64) string { return fmt.Sprintf("%.3g GB/s", v) }

// Table renders one line per node and backend: the address and interface
// the backend used, the rendezvous time, the bus bandwidth next to the link
// speed, and the status.
func (r *Report) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	problems := r.Problems()
	fmt.Fprintln(tw, "NODE\tBACKEND\tADDRESS\tINTERFACE\tRENDEZVOUS\tBUSBW\tLINK\tSTATUS")
	for _, n := range r.Nodes {
		res := n.Result
		if res == nil || !res.OK || len(res.Backends) == 0 {
			phase, rdv := "-", "-"
			if res != nil {
				phase = phaseName(res.Phase)
				if res.RendezvousS > 0 {
					rdv = fmt.Sprintf("%.2f s", res.RendezvousS)
				}
			}
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\t-\t-\tFAILED (%s)\n", n.Node, rdv, phase)
			continue
		}
		link := "-"
		if res.Link != nil && res.Link.SpeedMbps != nil {
			link = speed(*res.Link.SpeedMbps)
		}
		for _, name := range backendOrder(res.Backends) {
			be := res.Backends[name]
			status := "ok"
			for _, p := range problems {
				if p.Node == n.Node && p.Backend == name {
					if !p.Warning {
						status = "FAILED"
					} else if status == "ok" {
						status = "slow"
					}
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f s\t%.3f GB/s\t%s\t%s\n", n.Node, name, orDash(be.Addr), orDash(be.Iface), res.RendezvousS, be.BusBWGBps, link, status)
		}
	}
	tw.Flush()
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Source names a rank's output among the logs handed to diagnose.
const Source = "data-plane check"

// Logs returns every rank's output as a log for diagnose.Classify, head
// first: torch's and the backends' own lines (the result line, which
// quotes them, left out), then the failure of the command itself when it
// did not run.
func (r *Report) Logs() []diagnose.Log {
	logs := make([]diagnose.Log, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		var text []byte
		for _, line := range bytes.SplitAfter(n.Output, []byte("\n")) {
			if !bytes.Contains(line, []byte(ResultPrefix)) {
				text = append(text, line...)
			}
		}
		if n.Result == nil && n.Err != nil {
			text = append(text, []byte("\n"+n.Err.Error()+"\n")...)
		}
		logs = append(logs, diagnose.Log{Host: n.Node, Source: Source, Text: text})
	}
	return logs
}
