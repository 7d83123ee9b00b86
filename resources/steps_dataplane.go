package resources

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
)

// serveCheck returns the ranks of the check that runs before a serve on
// rc starts: CheckNodes, or nil when dataplane_check = false or the
// cluster has no workers (nothing crosses the fabric).
func serveCheck(cfg *Config, rc *RayCluster, addrs map[string]netip.Addr, ifaces map[string]string) []dataplane.Node {
	if rc == nil || !rc.DataplaneCheck || len(rc.Workers) == 0 {
		return nil
	}
	return CheckNodes(cfg, rc, addrs, ifaces)
}

// CheckNodes returns the ranks of cluster rc's data-plane check, head first:
// each node's Ray container and the fabric address and interface rayform
// pinned there.
func CheckNodes(cfg *Config, rc *RayCluster, addrs map[string]netip.Addr, ifaces map[string]string) []dataplane.Node {
	nw := cfg.Networks[rc.Network]
	var nodes []dataplane.Node
	for _, s := range ClusterSpecs(cfg, rc, addrs, ifaces) {
		iface := ifaces[s.Node]
		if nw != nil && nw.InterfaceFor(s.Node) != "" {
			iface = nw.InterfaceFor(s.Node)
		}
		nodes = append(nodes, dataplane.Node{Name: s.Node, Container: s.Name, Addr: addrs[s.Node], Iface: iface})
	}
	if len(nodes) > 0 {
		nodes[0].Busy = []int{rc.Port, rc.DashboardPort}
		for _, sv := range cfg.Serves {
			if sv.Cluster == rc.Name {
				nodes[0].Busy = append(nodes[0].Busy, sv.Port)
			}
		}
		sort.Ints(nodes[0].Busy)
	}
	return nodes
}

// dataplaneStep runs the data-plane check on the serve's cluster, after Ray
// is up and before vllm serve starts: a failure stops the apply with the
// classified cause; bandwidth far below the link speed is a warning.
func (r *serveRun) dataplaneStep() apply.Step {
	names := make([]string, len(r.s.Check))
	for i, n := range r.s.Check {
		names[i] = n.Name
	}
	return apply.Step{
		Name: "data-plane check (torch c10d, Gloo, NCCL) on " + describeNodes(names),
		Run: func(ctx context.Context, progress func(string)) error {
			ns, err := connected(r.e.Conns, r.s.Check)
			if err != nil {
				return err
			}
			rep := dataplane.Finish(ctx, r.e.Checks.take(r.w.Address, r.s.Check), ns, r.e.Dataplane)
			for _, line := range strings.Split(strings.TrimRight(rep.Table(), "\n"), "\n") {
				progress(line)
			}
			for _, p := range rep.Problems() {
				if p.Warning {
					progress("warning: " + p.Text)
				}
			}
			if rep.OK() {
				progress(fmt.Sprintf("data plane ok on %d nodes (rendezvous port %d; %s)", len(rep.Nodes), rep.Port, rep.Timing()))
				return nil
			}
			d := r.e.Diagnose
			if d.Serve == "" {
				d.Serve = r.w.Address
			}
			return CheckError(rep, d, "vllm serve "+r.spec.Name+" was not started")
		},
	}
}

// RunCheck runs the data-plane check on nodes over e's connections.
func RunCheck(ctx context.Context, e *StepEnv, nodes []dataplane.Node) (*dataplane.Report, error) {
	ns, err := connected(e.Conns, nodes)
	if err != nil {
		return nil, err
	}
	return dataplane.Run(ctx, ns, e.Dataplane), nil
}

// connected returns nodes with each node's connection from conns.
func connected(conns map[string]transport.Conn, nodes []dataplane.Node) ([]dataplane.Node, error) {
	ns := make([]dataplane.Node, len(nodes))
	for i, n := range nodes {
		n.Conn = conns[n.Name]
		if n.Conn == nil {
			return nil, fmt.Errorf("data-plane check: no connection to %s", n.Name)
		}
		ns[i] = n
	}
	return ns, nil
}

// CheckStarts are the data-plane checks of one apply whose ranks start
// ahead, as the containers they run in start: importing torch (seconds
// per process) then overlaps the rest of the cluster's start, and the
// check step before the serve only waits for what is left, then runs the
// rendezvous and the collectives. The rendezvous itself still happens
// after Ray's node table is verified. A nil *CheckStarts starts nothing
// ahead.
type CheckStarts struct {
	mu       sync.Mutex
	sessions map[string]*checkStart // by vllm_serve address
}

type checkStart struct {
	nodes []dataplane.Node
	s     *dataplane.Session
}

// NewCheckStarts prepares, for each serve of work that starts after a
// data-plane check, a session whose ranks launch as their containers
// start (ContainerStarted); its processes live within ctx until the check
// step takes them or Close cancels them.
func NewCheckStarts(ctx context.Context, conns map[string]transport.Conn, work map[string]*Work, o dataplane.Options) *CheckStarts {
	cs := &CheckStarts{sessions: map[string]*checkStart{}}
	for addr, w := range work {
		sw := serveWork(w)
		if sw == nil || !sw.Start || len(sw.Check) == 0 {
			continue
		}
		ns, err := connected(conns, sw.Check)
		if err != nil {
			continue // the check step reports it
		}
		cs.sessions[addr] = &checkStart{nodes: sw.Check, s: dataplane.Start(ctx, ns, o)}
	}
	return cs
}

// ContainerStarted launches the ranks that run in container on node.
func (cs *CheckStarts) ContainerStarted(node, container string) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, st := range cs.sessions {
		st.s.Launch(node, container)
	}
}

// take hands the session of serve over to its check step, once, when it
// checks the same nodes; nil otherwise.
func (cs *CheckStarts) take(serve string, nodes []dataplane.Node) *dataplane.Session {
	if cs == nil {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st := cs.sessions[serve]
	delete(cs.sessions, serve)
	if st == nil {
		return nil
	}
	if !slices.EqualFunc(st.nodes, nodes, func(a, b dataplane.Node) bool {
		return a.Name == b.Name && a.Container == b.Container && a.Addr == b.Addr && a.Iface == b.Iface
	}) {
		st.s.Close()
		return nil
	}
	return st.s
}

// Close cancels the ranks of every check no step took (the apply ended
// before its serve's check) and waits for them.
func (cs *CheckStarts) Close() {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	sessions := cs.sessions
	cs.sessions = map[string]*checkStart{}
	cs.mu.Unlock()
	for _, st := range sessions {
		st.s.Close()
	}
}

// CheckError is the failure of a data-plane check: what failed on which
// node, then the classified cause read from every rank's output (torch's
// and the backends' own lines). A failure no log rule explains (a backend
// on another address than the node's fabric address) gets its own cause.
func CheckError(rep *dataplane.Report, dctx diagnose.Context, consequence string) error {
	var lines []string
	var moved []dataplane.Problem
	for _, p := range rep.Problems() {
		if !p.Warning {
			lines = append(lines, "  "+p.Text)
			if p.Backend != "" {
				moved = append(moved, p)
			}
		}
	}
	err := fmt.Errorf("data-plane check failed (rendezvous %s:%d); %s:\n%s", rep.Master, rep.Port, consequence, strings.Join(lines, "\n"))
	d := diagnose.Classify(diagnose.Input{Logs: rep.Logs(), Context: dctx})
	if d.Cause == diagnose.Unknown {
		for _, l := range lines {
			if strings.Contains(l, "the image has no python3") || strings.Contains(l, "No module named 'torch'") {
				cluster := dctx.Cluster
				if cluster == "" {
					cluster = "the ray_cluster"
				}
				return &DiagnosedError{Err: err, Diagnosis: diagnose.Diagnosis{
					Cause:       "dataplane-no-torch",
					Title:       "the image has no python3 with torch: the data-plane check cannot run",
					Evidence:    []diagnose.Evidence{{Source: dataplane.Source + " report", Line: strings.TrimSpace(l), LineNo: 1}},
					Explanation: "The check runs torch.distributed inside each node's Ray container, under the image's own Python; vLLM images have both.",
					Fix:         "Use an image with Python and torch, or set dataplane_check = false on " + cluster + " to skip the check.",
				}}
			}
		}
	}
	if d.Cause == diagnose.Unknown && len(moved) > 0 {
		p := moved[0]
		d = diagnose.Diagnosis{
			Cause:       "dataplane-address",
			Title:       "the data plane on " + p.Node + " does not use the node's fabric address",
			Evidence:    []diagnose.Evidence{{Host: p.Node, Source: dataplane.Source + " report", Line: p.Text, LineNo: 1}},
			Explanation: "Ray and vLLM were given the address rayform observed on the fabric (VLLM_HOST_IP, --node-ip-address), but the collectives' connections on " + p.Node + " leave from another one: the address moved (DHCP, a re-plugged link) or the interface now holds a different one since the containers started.",
			Fix:         "Run rayform plan: it shows the new address, and apply recreates the node's Ray container with it. If the address should not have changed, restore it on " + p.Node + " (ip addr) and re-run apply.",
		}
	}
	return &DiagnosedError{Err: err, Diagnosis: d}
}
