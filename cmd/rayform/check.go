package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/serve"
)

// checkArgs are rayform check's arguments, parsed.
type checkArgs struct {
	run      runOptions
	opts     dataplane.Options
	clusters []string
}

// parseCheckArgs parses rayform check's arguments; ok false when parsing
// ended the command (with code).
func parseCheckArgs(c *cli, args []string) (a checkArgs, code int, ok bool) {
	fs := newFlagSet(c, "check", "check [options] [CLUSTER...]\n\n"+
		"  Run the data-plane check on running Ray clusters (all, or the named ones):\n"+
		"  one torch process per node inside its Ray container, a c10d rendezvous on\n"+
		"  the head's fabric address, a Gloo and (with GPUs) an NCCL all_reduce. Prints\n"+
		"  the address and interface each backend used, the rendezvous time and the\n"+
		"  bus bandwidth next to the link speed; exits 1 when the data plane fails.\n"+
		"  Without CLUSTER, clusters with dataplane_check = false are left out.")
	a.run.register(fs)
	timeout := fs.Duration("timeout", dataplane.DefaultTimeout, "bound on the rendezvous and on each collective")
	size := fs.Float64("size-mb", dataplane.DefaultSizeMiB, "all_reduce buffer in `MiB`")
	backends := fs.String("backends", "auto", "`LIST` of gloo, nccl; auto = gloo, plus nccl where CUDA is available")
	var env stringList
	fs.Var(&env, "env", "add `NAME=VALUE` to the check's environment over the container's (try a setting, e.g. NCCL_IB_HCA, before pinning it; repeatable)")
	if code, ok := parseFlags(fs, args); !ok {
		return a, code, false
	}
	a.opts = dataplane.Options{Timeout: *timeout, SizeMiB: *size, Backends: *backends, Env: map[string]string{}}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(c.stderr, "Error: -env %q: want NAME=VALUE\n", kv)
			return a, exitError, false
		}
		a.opts.Env[k] = v
	}
	a.clusters = fs.Args()
	return a, exitOK, true
}

// runCheck runs the data-plane check on running clusters.
func runCheck(ctx context.Context, c *cli, args []string) int {
	a, code, ok := parseCheckArgs(c, args)
	if !ok {
		return code
	}
	s, code := openSession(c, &a.run)
	if s == nil {
		return code
	}
	defer s.close()
	clusters, err := serve.CheckClusters(serve.View(s.cfg), a.clusters)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	obs, err := s.observeAndPlan(ctx, true)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	view := newCheckView(c.stdout, a.run.json)
	checker := serve.NewChecker(s.conns, obs.cfg, obs.facts, obs.result.Fabric, a.opts)
	failed := false
	for _, name := range clusters {
		addr := checker.Address(name)
		cc, err := checker.Check(ctx, name, func(nodes int, master netip.Addr) { view.Start(addr, nodes, master) })
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %s: %v\n", addr, err)
			failed = true
			continue
		}
		if cc.Failure != nil {
			failed = true
		}
		view.Report(cc)
	}
	if err := view.Done(); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	if failed {
		return exitError
	}
	return exitOK
}

// checkView shows the data-plane check: for a person (checkText) or as
// one JSON list of the clusters' reports (checkJSONView), chosen once per
// command.
type checkView interface {
	// Start says a cluster's check begins.
	Start(addr string, nodes int, master netip.Addr)
	// Report shows a cluster's check.
	Report(cc *serve.ClusterCheck)
	// Done ends the output.
	Done() error
}

func newCheckView(w io.Writer, json bool) checkView {
	if json {
		return &checkJSONView{w: w}
	}
	return checkText{w: w}
}

// checkText prints each cluster's table, warnings and verdict.
type checkText struct{ w io.Writer }

func (v checkText) Start(addr string, nodes int, master netip.Addr) {
	fmt.Fprintf(v.w, "%s: data-plane check on %d nodes, rendezvous on %s...\n", addr, nodes, master)
}

func (v checkText) Report(cc *serve.ClusterCheck) {
	rep := cc.Report
	fmt.Fprint(v.w, rep.Table())
	for _, p := range rep.Problems() {
		if p.Warning {
			fmt.Fprintf(v.w, "Warning: %s\n", p.Text)
		}
	}
	if cc.Failure != nil {
		fmt.Fprintf(v.w, "\nError: %s\n", cc.Failure)
	} else {
		fmt.Fprintf(v.w, "%s: data plane ok (rendezvous port %d; %s)\n", cc.Address, rep.Port, rep.Timing())
	}
}

func (checkText) Done() error { return nil }

// checkJSONView collects the reports and prints them as one list.
type checkJSONView struct {
	w       io.Writer
	reports []serve.CheckJSON
}

func (*checkJSONView) Start(string, int, netip.Addr) {}

func (v *checkJSONView) Report(cc *serve.ClusterCheck) { v.reports = append(v.reports, cc.JSON()) }

func (v *checkJSONView) Done() error {
	enc := json.NewEncoder(v.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v.reports)
}
