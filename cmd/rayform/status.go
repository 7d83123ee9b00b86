package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources"
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
				fmt.Fprint(c.stdout, "\x1b[H\x1b[2J")
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

// statusReport is status's document (-json prints it as is).
type statusReport struct {
	Project  string          `json:"project"`
	Healthy  bool            `json:"healthy"`
	Problems []string        `json:"problems"`
	Nodes    []statusNode    `json:"nodes"`
	Clusters []statusCluster `json:"clusters"`
	Serves   []statusServe   `json:"serves"`
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

type statusCluster struct {
	Address  string          `json:"address"`
	Head     string          `json:"head"`
	Ray      []statusRayNode `json:"ray_nodes"`
	RayError string          `json:"ray_error,omitempty"`
}

type statusRayNode struct {
	NodeIP string  `json:"node_ip"`
	State  string  `json:"state"`
	IsHead bool    `json:"is_head"`
	GPUs   float64 `json:"gpus"`
}

type statusServe struct {
	Address  string `json:"address"`
	Node     string `json:"node"`
	Endpoint string `json:"endpoint,omitempty"`
	// Health is "ok", "starting", "hung", "down" or "unhealthy".
	Health       string   `json:"health"`
	HealthDetail string   `json:"health_detail,omitempty"`
	Models       []string `json:"models,omitempty"`
	// UptimeSeconds is how long the serve process has run (0: unknown).
	UptimeSeconds int64                  `json:"uptime_seconds,omitempty"`
	Metrics       *resources.VLLMMetrics `json:"metrics,omitempty"`
}

// status observes the hosts once, with plan's probe plus each serve's
// /metrics and start time (resources.StatusProbes), and builds the
// report.
func (s *session) status(ctx context.Context) (*statusReport, error) {
	s.statusProbes = true
	obs, err := s.observeAndPlan(ctx, false)
	if err != nil {
		return nil, err
	}
	return buildStatus(s.project, obs), nil
}

// buildStatus is the report of one observation and its plan: every
// judgment in it is the plan's (findings, drift, changes) or resources'
// (Ray's node table, each serve's health on its own port: JudgeServe), so
// status and plan never disagree about a fact.
func buildStatus(project string, obs *observed) *statusReport {
	cfg, facts, p := obs.cfg, obs.facts, obs.result.Plan
	rep := &statusReport{Project: project, Problems: []string{}, Nodes: []statusNode{}, Clusters: []statusCluster{}, Serves: []statusServe{}}
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
	for _, rc := range sortedClusterList(cfg) {
		sc := statusCluster{Address: rc.Addr, Head: rc.Head, Ray: []statusRayNode{}}
		if hf := facts.Hosts[rc.Head]; hf != nil {
			table := resources.RayTable(hf, rc)
			sc.RayError = table.Err
			alive := map[string]bool{}
			for _, n := range table.Alive() {
				alive[n.NodeIP] = true
			}
			for _, n := range table.List {
				sc.Ray = append(sc.Ray, statusRayNode{NodeIP: n.NodeIP, State: n.State, IsHead: n.IsHead, GPUs: n.GPUs()})
				// A DEAD row beside an ALIVE one of the same address is
				// the node's earlier life (it restarted); alone, the node
				// is gone from Ray.
				if n.State != "ALIVE" && !alive[n.NodeIP] {
					msg := fmt.Sprintf("%s: Ray node %s is %s", rc.Addr, n.NodeIP, n.State)
					if n.StateMessage != "" {
						msg += ": " + firstLine(n.StateMessage)
					}
					rep.Problems = append(rep.Problems, msg)
				}
			}
			sort.Slice(sc.Ray, func(i, j int) bool { return sc.Ray[i].NodeIP < sc.Ray[j].NodeIP })
		}
		rep.Clusters = append(rep.Clusters, sc)
	}
	serveNames := make([]string, 0, len(cfg.Serves))
	for n := range cfg.Serves {
		serveNames = append(serveNames, n)
	}
	sort.Strings(serveNames)
	for _, name := range serveNames {
		sv := cfg.Serves[name]
		ss := statusServeOf(project, sv, obs)
		if ss.Health != resources.HealthOK {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s (%s)", sv.Addr, ss.Health, ss.HealthDetail))
		}
		rep.Serves = append(rep.Serves, ss)
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

func sortedClusterList(cfg *resources.Config) []*resources.RayCluster {
	var out []*resources.RayCluster
	for _, rc := range cfg.RayClusters {
		out = append(out, rc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
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
		if c.Labels[resources.LabelManaged] != "true" || c.Labels[resources.LabelProject] != project {
			continue
		}
		sn.Containers = append(sn.Containers, statusContainer{Name: c.Name, Resource: c.Labels[resources.LabelResource], Image: c.Image, State: c.State, Status: c.Status})
	}
	return sn
}

// statusServeOf reads a serve from the observation: its health from its
// record and its own port's answers, judged as plan judges them
// (JudgeServe), its uptime and vLLM's metrics.
func statusServeOf(project string, sv *resources.VLLMServe, obs *observed) statusServe {
	rc := obs.cfg.RayClusters[sv.Cluster]
	ss := statusServe{Address: sv.Addr, Endpoint: sv.Endpoint, Health: resources.HealthDown}
	if rc == nil {
		ss.HealthDetail = "its cluster is not in the configuration"
		return ss
	}
	ss.Node = rc.Head
	hf := obs.facts.Hosts[rc.Head]
	if hf == nil {
		ss.HealthDetail = "the head could not be observed"
		return ss
	}
	spec, err := resources.ServeSpecFor(obs.cfg, sv)
	if err != nil {
		ss.HealthDetail = err.Error()
		return ss
	}
	answer := resources.ServeAnswer(hf, sv.Port)
	h := resources.JudgeServe(resources.ServeRecord(hf, sv.Name), answer, spec)
	ss.Health, ss.HealthDetail = h.State, h.Detail
	for _, m := range answer.Models {
		ss.Models = append(ss.Models, m.ID)
	}
	if h.State == resources.HealthDown {
		return ss
	}
	uptime := resources.ServeUptime(hf, spec, project)
	ss.UptimeSeconds = int64(uptime / time.Second)
	if h.State == resources.HealthOK {
		ss.Metrics = resources.ServeMetrics(hf, sv.Port, uptime)
	}
	return ss
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return "no answer"
	}
	return s
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
	for _, c := range r.Clusters {
		fmt.Fprintf(w, "\nRay (%s, head %s):\n", c.Address, c.Head)
		if len(c.Ray) == 0 {
			fmt.Fprintf(w, "  no node table: %s\n", orDash(c.RayError))
		}
		for _, n := range c.Ray {
			role := ""
			if n.IsHead {
				role = "head"
			}
			fmt.Fprintf(w, "  %-16s %-6s %-4s %g GPU\n", n.NodeIP, n.State, role, n.GPUs)
		}
	}
	for _, sv := range r.Serves {
		fmt.Fprintf(w, "\nServe %s on %s:\n", sv.Address, orDash(sv.Node))
		fmt.Fprintf(w, "  health    %s (%s)\n", sv.Health, sv.HealthDetail)
		if len(sv.Models) > 0 {
			fmt.Fprintf(w, "  model     %s\n", strings.Join(sv.Models, ", "))
		}
		if sv.UptimeSeconds > 0 {
			fmt.Fprintf(w, "  uptime    %s\n", time.Duration(sv.UptimeSeconds)*time.Second)
		}
		if m := sv.Metrics; m != nil {
			fmt.Fprintf(w, "  requests  %g finished, %g running, %g waiting\n", m.RequestsFinished, m.RequestsRunning, m.RequestsWaiting)
			fmt.Fprintf(w, "  tokens    %g prompt, %g generated (%.1f tokens/s on average since start)\n", m.PromptTokens, m.GenerationTokens, m.TokensPerSecond)
		}
		if sv.Endpoint != "" {
			fmt.Fprintf(w, "  endpoint  %s\n", sv.Endpoint)
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
