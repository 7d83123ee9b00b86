package serve

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/stepenv"
)

// What rayform check runs: the data-plane check of a cluster's nodes, as
// a serve runs it before it starts (CheckNodes), on the clusters named.

// CheckClusters returns the names of the clusters rayform check runs on:
// the named ones (NAME or ray_cluster.NAME), or every cluster with
// workers whose dataplane_check is on.
func CheckClusters(cfg *Blocks, args []string) ([]string, error) {
	var names []string
	if len(args) == 0 {
		off := 0
		for name, rc := range cfg.RayClusters {
			switch {
			case len(rc.Workers) == 0:
			case !rc.DataplaneCheck:
				off++
			default:
				names = append(names, name)
			}
		}
		sort.Strings(names)
		if len(names) == 0 && off > 0 {
			return nil, errors.New("every ray_cluster with workers has dataplane_check = false: name one (rayform check NAME) to run the check on it anyway")
		}
		if len(names) == 0 {
			return nil, errors.New("no ray_cluster with workers in the configuration: the data-plane check needs two nodes or more")
		}
		return names, nil
	}
	for _, a := range args {
		name := cluster.ClusterName(a)
		if _, ok := cfg.RayClusters[name]; !ok {
			return nil, fmt.Errorf("no ray_cluster %q in the configuration", name)
		}
		names = append(names, name)
	}
	return names, nil
}

// Checker runs the data-plane check on the clusters of one observation:
// cfg evaluated with facts, and the plan's result.
type Checker struct {
	conns  map[string]transport.Conn
	cfg    *Blocks
	facts  *observe.Facts
	fabric map[string]netip.Addr
	opts   dataplane.Options
	addrs  map[string]netip.Addr
	ifaces map[string]string
}

// NewChecker is the check of the clusters of cfg (evaluated with facts)
// over conns; fabric are the nodes' fabric addresses the plan read.
func NewChecker(conns map[string]transport.Conn, cfg *config.Config, facts *observe.Facts, fabric map[string]netip.Addr, o dataplane.Options) *Checker {
	v := View(cfg)
	addrs, ifaces := cluster.FabricAddrs(cluster.View(cfg), facts)
	return &Checker{conns: conns, cfg: v, facts: facts, fabric: fabric, opts: o, addrs: addrs, ifaces: ifaces}
}

// ClusterCheck is the data-plane check of one cluster.
type ClusterCheck struct {
	// Address is the cluster's.
	Address string
	// Report is what the check found.
	Report *dataplane.Report
	// Failure is why the collectives would fail, diagnosed; nil when the
	// data plane is ok.
	Failure error
}

// Address is the address of the cluster called name.
func (c *Checker) Address(name string) string { return cluster.ClusterAddress(name) }

// Check runs the check on the cluster called name; start is told, before,
// on how many nodes and at which rendezvous address. An error says the
// check could not run.
func (c *Checker) Check(ctx context.Context, name string, start func(nodes int, master netip.Addr)) (*ClusterCheck, error) {
	rc := c.cfg.RayClusters[name]
	nodes := CheckNodes(c.cfg, rc, c.addrs, c.ifaces)
	if !nodes[0].Addr.IsValid() {
		return nil, fmt.Errorf("the head %s has no observed fabric address (run rayform plan)", rc.Head)
	}
	start(len(nodes), nodes[0].Addr)
	rep, err := stepenv.RunCheck(ctx, &stepenv.StepEnv{Conns: c.conns, Dataplane: c.opts}, nodes)
	if err != nil {
		return nil, err
	}
	out := &ClusterCheck{Address: rc.Addr, Report: rep}
	if !rep.OK() {
		dctx := cluster.Kind{}.DiagnoseContext(c.cfg.Config, c.facts, c.fabric, rc.Addr)
		out.Failure = CheckError(rep, dctx, "the cluster's collectives would fail")
	}
	return out, nil
}

// CheckJSON is one cluster's report in check -json.
type CheckJSON struct {
	Cluster   string              `json:"cluster"`
	OK        bool                `json:"ok"`
	Master    string              `json:"master"`
	ElapsedS  float64             `json:"elapsed_s"`
	Nodes     []CheckNodeJSON     `json:"nodes"`
	Problems  []dataplane.Problem `json:"problems"`
	Error     string              `json:"error,omitempty"`
	Diagnosis *DiagnosisJSON      `json:"diagnosis,omitempty"`
}

// DiagnosisJSON is a diagnose.Diagnosis in check -json.
type DiagnosisJSON struct {
	Cause       string         `json:"cause"`
	Title       string         `json:"title"`
	Evidence    []EvidenceJSON `json:"evidence"`
	Explanation string         `json:"explanation"`
	Fix         string         `json:"fix"`
}

// EvidenceJSON is one line of a diagnosis's evidence.
type EvidenceJSON struct {
	Host   string `json:"host"`
	Source string `json:"source"`
	Line   string `json:"line"`
	LineNo int    `json:"line_no"`
}

// CheckNodeJSON is one node's part in check -json.
type CheckNodeJSON struct {
	Node   string            `json:"node"`
	Addr   string            `json:"fabric_addr"`
	Iface  string            `json:"fabric_iface"`
	Result *dataplane.Result `json:"result"`
	Error  string            `json:"error,omitempty"`
}

// JSON is cc as check -json shows it.
func (cc *ClusterCheck) JSON() CheckJSON {
	rep := cc.Report
	out := CheckJSON{Cluster: cc.Address, OK: cc.Failure == nil, Master: fmt.Sprintf("%s:%d", rep.Master, rep.Port),
		ElapsedS: rep.Elapsed.Seconds(), Problems: rep.Problems()}
	if out.Problems == nil {
		out.Problems = []dataplane.Problem{}
	}
	for _, n := range rep.Nodes {
		nj := CheckNodeJSON{Node: n.Node, Addr: n.Addr.String(), Iface: n.Iface, Result: n.Result}
		if n.Err != nil {
			nj.Error = n.Err.Error()
		}
		out.Nodes = append(out.Nodes, nj)
	}
	var de *stepenv.DiagnosedError
	if errors.As(cc.Failure, &de) {
		out.Error = de.Err.Error()
		d := de.Diagnosis
		out.Diagnosis = &DiagnosisJSON{Cause: string(d.Cause), Title: d.Title, Explanation: d.Explanation, Fix: d.Fix, Evidence: EvidenceOf(d)}
	}
	return out
}

// EvidenceOf is d's evidence as -json shows it (never null).
func EvidenceOf(d diagnose.Diagnosis) []EvidenceJSON {
	out := []EvidenceJSON{}
	for _, e := range d.Evidence {
		out = append(out, EvidenceJSON{Host: e.Host, Source: e.Source, Line: e.Line, LineNo: e.LineNo})
	}
	return out
}
