package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/termtext"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/kind"
)

// exitUnhealthy is status's exit code for a cluster that is not healthy.
const exitUnhealthy = 2

// runStatus prints one screen per cluster from one observation of the
// hosts (the plan's), plus one read of each serve's /metrics on its head.
func runStatus(ctx context.Context, c *cli, args []string) int {
	var opts runOptions
	fs := newFlagSet(c, "status", "status [options]\n\n  Observe the hosts once (read-only) and show nodes, containers, Ray's node\n  table and each serve's health, model, uptime, requests and tokens. Exits 0\n  when everything is healthy and as configured, 2 when not, 1 on error.")
	opts.register(fs)
	watch := fs.Duration("watch", 0, "on a terminal, refresh every `D` (e.g. 5s) until interrupted")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "Error: status takes no arguments (got %q)\n", fs.Args())
		return exitError
	}
	if *watch > 0 && (opts.json || !isTerminal(c.stdout)) {
		fmt.Fprintln(c.stderr, "Error: -watch refreshes a terminal; without one (or with -json), run status from a loop or cron")
		return exitError
	}
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	for {
		rep, err := s.status(ctx)
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		if opts.json {
			b, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				fmt.Fprintf(c.stderr, "Error: %v\n", err)
				return exitError
			}
			fmt.Fprintf(c.stdout, "%s\n", b)
		} else {
			if *watch > 0 {
				// rayform's own control: it passes the escaper.
				termtext.Control(c.stdout, "\x1b[H\x1b[2J")
			}
			rep.render(c.stdout)
		}
		if *watch == 0 {
			if !rep.Healthy {
				return exitUnhealthy
			}
			return exitOK
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(*watch):
		}
	}
}

// statusReport is status's document (-json prints it as is: project,
// healthy, problems, nodes, then each kind's list under the key its
// traits name, kind.Traits.Status).
type statusReport struct {
	Project  string       `json:"project"`
	Healthy  bool         `json:"healthy"`
	Problems []string     `json:"problems"`
	Nodes    []statusNode `json:"nodes"`
	// Kinds are each listed kind's resources, in registration order.
	Kinds []statusKind `json:"-"`
}

// statusKind is one kind's list in the report.
type statusKind struct {
	Key   string
	Items []kind.Status
}

// MarshalJSON writes the report's fields, then each kind's list of values
// under its key.
func (r *statusReport) MarshalJSON() ([]byte, error) {
	type fixed statusReport
	head, err := json.Marshal((*fixed)(r))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	for _, k := range r.Kinds {
		vals := make([]any, 0, len(k.Items))
		for _, it := range k.Items {
			vals = append(vals, it.Value)
		}
		key, _ := json.Marshal(k.Key)
		v, err := json.Marshal(vals)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, ",%s:%s", key, v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

type statusNode struct {
	Name                 string            `json:"name"`
	Host                 string            `json:"host"`
	Reachable            bool              `json:"reachable"`
	Error                string            `json:"error,omitempty"`
	GPUs                 []string          `json:"gpus"`
	MemoryTotalBytes     uint64            `json:"memory_total_bytes,omitempty"`
	MemoryAvailableBytes uint64            `json:"memory_available_bytes,omitempty"`
	FabricAddress        string            `json:"fabric_address,omitempty"`
	Containers           []statusContainer `json:"containers"`
}

type statusContainer struct {
	Name     string `json:"name"`
	Resource string `json:"resource,omitempty"`
	Image    string `json:"image"`
	State    string `json:"state"`
	Status   string `json:"status,omitempty"`
}

// status observes the hosts once, with plan's probe plus what the kinds
// show in status (kind.Observation.Status: each serve's /metrics and start
// time), and builds the report.
func (s *session) status(ctx context.Context) (*statusReport, error) {
	s.statusProbes = true
	obs, err := s.observeAndPlan(ctx, false)
	if err != nil {
		return nil, err
	}
	return buildStatus(s.project, obs), nil
}

// buildStatus is the report of one observation and its plan: every
// judgment in it is the plan's (findings, drift, changes) or the kinds'
// (kind.Kind.Status: Ray's node table, each serve's health on its own
// port, JudgeServe), so status and plan never disagree about a fact.
func buildStatus(project string, obs *observed) *statusReport {
	cfg, facts, p := obs.cfg, obs.facts, obs.result.Plan
	rep := &statusReport{Project: project, Problems: []string{}, Nodes: []statusNode{}}
	for _, f := range p.Findings {
		if f.Severity == plan.Error {
			rep.Problems = append(rep.Problems, findingLine(f))
		}
	}
	for _, d := range p.Drift {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s (on %s)", d.Address, d.Summary, d.Host))
	}
	for _, ch := range p.Changes {
		if ch.Action != plan.NoOp {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: apply would %s it: %s", ch.Address, ch.Action, changeReason(ch)))
		}
	}
	names := make([]string, 0, len(cfg.Nodes))
	for n := range cfg.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		rep.Nodes = append(rep.Nodes, statusNodeOf(project, cfg.Nodes[name], facts, obs))
	}
	q := kind.StatusQuery{Config: cfg.Config, Facts: facts, Plan: p, Project: project}
	for _, k := range resources.Kinds() {
		key := k.Traits().Status
		if key == "" {
			continue
		}
		sk := statusKind{Key: key, Items: k.Status(q)}
		for _, it := range sk.Items {
			rep.Problems = append(rep.Problems, it.Problems...)
		}
		rep.Kinds = append(rep.Kinds, sk)
	}
	rep.Problems = dedupe(rep.Problems)
	rep.Healthy = len(rep.Problems) == 0
	return rep
}

// changeReason is why apply would change a resource: the plan's reasons,
// else what the action itself says.
func changeReason(ch plan.ResourceChange) string {
	if len(ch.Reasons) > 0 {
		return strings.Join(ch.Reasons, "; ")
	}
	on := ""
	if len(ch.Hosts) > 0 {
		on = " on " + strings.Join(ch.Hosts, ", ")
	}
	switch ch.Action {
	case plan.Create:
		return "it does not exist" + on
	case plan.Delete:
		return "it is no longer in the configuration"
	}
	var attrs []string
	for _, a := range ch.Attrs {
		if a.Changed() {
			attrs = append(attrs, a.Name)
		}
	}
	if len(attrs) > 0 {
		return "its " + strings.Join(attrs, ", ") + " changed"
	}
	return "it differs from the configuration" + on
}

func findingLine(f plan.Finding) string {
	where := f.Address
	if f.Host != "" {
		where += " on " + f.Host
	}
	return fmt.Sprintf("%s: %s", where, f.Summary)
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func statusNodeOf(project string, n *resources.Node, facts *observe.Facts, obs *observed) statusNode {
	sn := statusNode{Name: n.Name, Host: n.Host, GPUs: []string{}, Containers: []statusContainer{}}
	if err, ok := facts.Errors[n.Name]; ok {
		sn.Error = err.Error()
		return sn
	}
	hf := facts.Hosts[n.Name]
	if hf == nil {
		sn.Error = "not observed"
		return sn
	}
	sn.Reachable = hf.Err == "" || hf.Complete
	sn.Error = hf.Err
	for _, g := range hf.GPUs.List {
		sn.GPUs = append(sn.GPUs, g.Name)
	}
	sn.MemoryTotalBytes, sn.MemoryAvailableBytes = hf.Memory.TotalBytes, hf.Memory.AvailableBytes
	if a, ok := obs.result.Addrs[n.Name]; ok && a.IsValid() {
		sn.FabricAddress = a.String()
	}
	for _, c := range hf.Containers.List {
		if c.Labels[cluster.LabelManaged] != "true" || c.Labels[cluster.LabelProject] != project {
			continue
		}
		sn.Containers = append(sn.Containers, statusContainer{Name: c.Name, Resource: c.Labels[cluster.LabelResource], Image: c.Image, State: c.State, Status: c.Status})
	}
	return sn
}

// render prints the report as text.
func (r *statusReport) render(w io.Writer) {
	verdict := "healthy"
	if !r.Healthy {
		verdict = fmt.Sprintf("NOT HEALTHY (%d problems)", len(r.Problems))
	}
	fmt.Fprintf(w, "Project %s: %s\n", r.Project, verdict)
	fmt.Fprintln(w, "\nNodes:")
	for _, n := range r.Nodes {
		if !n.Reachable {
			fmt.Fprintf(w, "  %-10s %-16s UNREACHABLE: %s\n", n.Name, n.Host, n.Error)
			continue
		}
		gpus := fmt.Sprintf("%d GPU", len(n.GPUs))
		if len(n.GPUs) != 1 {
			gpus += "s"
		}
		if len(n.GPUs) > 0 {
			gpus += " (" + n.GPUs[0] + ")"
		}
		fabric := ""
		if n.FabricAddress != "" {
			fabric = "  fabric " + n.FabricAddress
		}
		fmt.Fprintf(w, "  %-10s %-16s reachable  %s  memory %s (%s available)%s\n", n.Name, n.Host, gpus,
			gib(n.MemoryTotalBytes), gib(n.MemoryAvailableBytes), fabric)
	}
	fmt.Fprintln(w, "\nContainers:")
	listed := false
	for _, n := range r.Nodes {
		for _, c := range n.Containers {
			listed = true
			fmt.Fprintf(w, "  %-10s %-20s %-8s %-22s %s\n", n.Name, c.Name, c.State, c.Status, c.Image)
		}
	}
	if !listed {
		fmt.Fprintln(w, "  (none of this project's)")
	}
	for _, k := range r.Kinds {
		for _, it := range k.Items {
			it.Render(w)
		}
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
		fmt.Fprintln(w, "\nRun rayform plan for the details and the fixes.")
	}
}

func gib(b uint64) string {
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
