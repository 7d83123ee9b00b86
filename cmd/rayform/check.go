package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/hostenv"
	"github.com/rayform/rayform/resources/serve"
)

// runCheck runs the data-plane check on running clusters.
func runCheck(ctx context.Context, c *cli, args []string) int {
	var opts runOptions
	fs := newFlagSet(c, "check", "check [options] [CLUSTER...]\n\n"+
		"  Run the data-plane check on running Ray clusters (all, or the named ones):\n"+
		"  one torch process per node inside its Ray container, a c10d rendezvous on\n"+
		"  the head's fabric address, a Gloo and (with GPUs) an NCCL all_reduce. Prints\n"+
		"  the address and interface each backend used, the rendezvous time and the\n"+
		"  bus bandwidth next to the link speed; exits 1 when the data plane fails.\n"+
		"  Without CLUSTER, clusters with dataplane_check = false are left out.")
	opts.register(fs)
	timeout := fs.Duration("timeout", dataplane.DefaultTimeout, "bound on the rendezvous and on each collective")
	size := fs.Float64("size-mb", dataplane.DefaultSizeMiB, "all_reduce buffer in `MiB`")
	backends := fs.String("backends", "auto", "`LIST` of gloo, nccl; auto = gloo, plus nccl where CUDA is available")
	var env stringList
	fs.Var(&env, "env", "add `NAME=VALUE` to the check's environment over the container's (try a setting, e.g. NCCL_IB_HCA, before pinning it; repeatable)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	o := dataplane.Options{Timeout: *timeout, SizeMiB: *size, Backends: *backends, Env: map[string]string{}}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(c.stderr, "Error: -env %q: want NAME=VALUE\n", kv)
			return exitError
		}
		o.Env[k] = v
	}
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	clusters, err := checkClusters(s.cfg, fs.Args())
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	obs, err := s.observeAndPlan(ctx, true)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	addrs, ifaces := cluster.FabricAddrs(cluster.View(obs.cfg.Config), obs.facts)
	env0 := &hostenv.StepEnv{Conns: s.conns, Dataplane: o}
	failed := false
	var reports []checkJSON
	for _, name := range clusters {
		rc := obs.cfg.RayClusters[name]
		nodes := serve.CheckNodes(serve.View(obs.cfg.Config), rc, addrs, ifaces)
		if !nodes[0].Addr.IsValid() {
			fmt.Fprintf(c.stderr, "Error: %s: the head %s has no observed fabric address (run rayform plan)\n", rc.Addr, rc.Head)
			failed = true
			continue
		}
		if !opts.json {
			fmt.Fprintf(c.stdout, "%s: data-plane check on %d nodes, rendezvous on %s...\n", rc.Addr, len(nodes), nodes[0].Addr)
		}
		rep, err := hostenv.RunCheck(ctx, env0, nodes)
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %s: %v\n", rc.Addr, err)
			failed = true
			continue
		}
		dctx := resources.DiagnoseContext(obs.cfg, obs.facts, obs.result.Addrs, &resources.Work{Address: rc.Addr})
		var cerr error
		if !rep.OK() {
			failed = true
			cerr = serve.CheckError(rep, dctx, "the cluster's collectives would fail")
		}
		if opts.json {
			reports = append(reports, toCheckJSON(rc.Addr, rep, cerr))
			continue
		}
		fmt.Fprint(c.stdout, rep.Table())
		for _, p := range rep.Problems() {
			if p.Warning {
				fmt.Fprintf(c.stdout, "Warning: %s\n", p.Text)
			}
		}
		if cerr != nil {
			fmt.Fprintf(c.stdout, "\nError: %s\n", cerr)
		} else {
			fmt.Fprintf(c.stdout, "%s: data plane ok (rendezvous port %d; %s)\n", rc.Addr, rep.Port, rep.Timing())
		}
	}
	if opts.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
	}
	if failed {
		return exitError
	}
	return exitOK
}

// checkClusters returns the names of the clusters to check: the named
// ones (NAME or ray_cluster.NAME), or every cluster with workers.
func checkClusters(cfg *resources.Config, args []string) ([]string, error) {
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

// checkJSON is one cluster's report in check -json.
type checkJSON struct {
	Cluster   string              `json:"cluster"`
	OK        bool                `json:"ok"`
	Master    string              `json:"master"`
	ElapsedS  float64             `json:"elapsed_s"`
	Nodes     []checkNodeJSON     `json:"nodes"`
	Problems  []dataplane.Problem `json:"problems"`
	Error     string              `json:"error,omitempty"`
	Diagnosis *diagnosisJSON      `json:"diagnosis,omitempty"`
}

// diagnosisJSON is a diagnose.Diagnosis in check -json.
type diagnosisJSON struct {
	Cause       string         `json:"cause"`
	Title       string         `json:"title"`
	Evidence    []evidenceJSON `json:"evidence"`
	Explanation string         `json:"explanation"`
	Fix         string         `json:"fix"`
}

type evidenceJSON struct {
	Host   string `json:"host"`
	Source string `json:"source"`
	Line   string `json:"line"`
	LineNo int    `json:"line_no"`
}

type checkNodeJSON struct {
	Node   string            `json:"node"`
	Addr   string            `json:"fabric_addr"`
	Iface  string            `json:"fabric_iface"`
	Result *dataplane.Result `json:"result"`
	Error  string            `json:"error,omitempty"`
}

func toCheckJSON(addr string, rep *dataplane.Report, cerr error) checkJSON {
	out := checkJSON{Cluster: addr, OK: cerr == nil, Master: fmt.Sprintf("%s:%d", rep.Master, rep.Port),
		ElapsedS: rep.Elapsed.Seconds(), Problems: rep.Problems()}
	if out.Problems == nil {
		out.Problems = []dataplane.Problem{}
	}
	for _, n := range rep.Nodes {
		nj := checkNodeJSON{Node: n.Node, Addr: n.Addr.String(), Iface: n.Iface, Result: n.Result}
		if n.Err != nil {
			nj.Error = n.Err.Error()
		}
		out.Nodes = append(out.Nodes, nj)
	}
	var de *hostenv.DiagnosedError
	if errors.As(cerr, &de) {
		out.Error = de.Err.Error()
		d := de.Diagnosis
		out.Diagnosis = &diagnosisJSON{Cause: string(d.Cause), Title: d.Title, Explanation: d.Explanation, Fix: d.Fix, Evidence: []evidenceJSON{}}
		for _, e := range d.Evidence {
			out.Diagnosis.Evidence = append(out.Diagnosis.Evidence, evidenceJSON{Host: e.Host, Source: e.Source, Line: e.Line, LineNo: e.LineNo})
		}
	}
	return out
}
