package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
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
	UptimeSeconds int64         `json:"uptime_seconds,omitempty"`
	Metrics       *serveMetrics `json:"metrics,omitempty"`
}

// serveMetrics are vLLM's /metrics counters and gauges, summed over
// their labels.
type serveMetrics struct {
	RequestsFinished float64 `json:"requests_finished"`
	RequestsRunning  float64 `json:"requests_running"`
	RequestsWaiting  float64 `json:"requests_waiting"`
	PromptTokens     float64 `json:"prompt_tokens"`
	GenerationTokens float64 `json:"generation_tokens"`
	// TokensPerSecond is generation tokens over the uptime: the average
	// since the serve started.
	TokensPerSecond float64 `json:"tokens_per_second_avg"`
}

// status observes the hosts once and builds the report.
func (s *session) status(ctx context.Context) (*statusReport, error) {
	obs, err := s.observeAndPlan(ctx, false)
	if err != nil {
		return nil, err
	}
	cfg, facts, p := obs.cfg, obs.facts, obs.result.Plan
	rep := &statusReport{Project: s.project, Problems: []string{}, Nodes: []statusNode{}, Clusters: []statusCluster{}, Serves: []statusServe{}}
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
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: apply would %s it: %s", ch.Address, ch.Action, strings.Join(ch.Reasons, "; ")))
		}
	}
	names := make([]string, 0, len(cfg.Nodes))
	for n := range cfg.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		rep.Nodes = append(rep.Nodes, s.statusNode(cfg.Nodes[name], facts, obs))
	}
	for _, rc := range sortedClusterList(cfg) {
		sc := statusCluster{Address: rc.Addr, Head: rc.Head, Ray: []statusRayNode{}}
		if hf := facts.Hosts[rc.Head]; hf != nil {
			sc.RayError = hf.RayNodes.Err
			for _, n := range hf.RayNodes.List {
				sc.Ray = append(sc.Ray, statusRayNode{NodeIP: n.NodeIP, State: n.State, IsHead: n.IsHead, GPUs: n.GPUs()})
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
		ss := s.statusServe(ctx, sv, obs)
		if ss.Health != "ok" {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s (%s)", sv.Addr, ss.Health, ss.HealthDetail))
		}
		rep.Serves = append(rep.Serves, ss)
	}
	rep.Problems = dedupe(rep.Problems)
	rep.Healthy = len(rep.Problems) == 0
	return rep, nil
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

func (s *session) statusNode(n *resources.Node, facts *observe.Facts, obs *observed) statusNode {
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
		if c.Labels[resources.LabelManaged] != "true" || c.Labels[resources.LabelProject] != s.project {
			continue
		}
		sn.Containers = append(sn.Containers, statusContainer{Name: c.Name, Resource: c.Labels[resources.LabelResource], Image: c.Image, State: c.State, Status: c.Status})
	}
	return sn
}

// statusServe reads a serve's health from the observation, and its
// uptime and /metrics from its head in one more command.
func (s *session) statusServe(ctx context.Context, sv *resources.VLLMServe, obs *observed) statusServe {
	rc := obs.cfg.RayClusters[sv.Cluster]
	ss := statusServe{Address: sv.Addr, Endpoint: sv.Endpoint, Health: "down"}
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
	rec := hf.Serves[sv.Name]
	h := hf.VLLM.Health
	switch {
	case h.Status == 200:
		ss.Health, ss.HealthDetail = "ok", "/health 200"
	case h.Status != 0:
		ss.Health, ss.HealthDetail = "unhealthy", fmt.Sprintf("/health %d", h.Status)
	case !rec.Found || !rec.Alive:
		ss.Health, ss.HealthDetail = "down", "no vllm serve process"
	case h.Refused:
		ss.Health, ss.HealthDetail = "starting", "the process runs, its port is not open yet"
	default:
		ss.Health, ss.HealthDetail = "hung", "the process runs but /health did not answer: "+firstLine(h.Err)
	}
	for _, m := range hf.VLLM.Models {
		ss.Models = append(ss.Models, m.ID)
	}
	conn, ok := s.conns[rc.Head]
	if !ok || !rec.Found {
		return ss
	}
	spec := resources.ServeSpec{Name: sv.Name, Container: resources.ContainerName(rc), Node: rc.Head}
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", sv.Port)
	script := fmt.Sprintf("stat -c %%Y %s 2>/dev/null || echo -; date +%%s; echo ---; if [ %s = ok ]; then curl -q -sS -m 2 %s 2>/dev/null || wget -q -T 2 -O - %s 2>/dev/null; fi; true",
		shell.Quote(spec.HostPidPath(s.project)), shell.Quote(ss.Health), shell.Quote(url), shell.Quote(url))
	res, err := conn.Run(ctx, transport.Cmd{Script: script, Timeout: 10 * time.Second})
	if err != nil {
		return ss
	}
	started, now, metrics := parseServeStatus(res.Stdout)
	if started > 0 && now >= started {
		ss.UptimeSeconds = now - started
	}
	if metrics != nil && ss.UptimeSeconds > 0 {
		metrics.TokensPerSecond = metrics.GenerationTokens / float64(ss.UptimeSeconds)
	}
	ss.Metrics = metrics
	return ss
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return "no answer"
	}
	return s
}

// parseServeStatus reads the serve status command's output: the pid
// file's mtime (or "-"), the host's clock, "---", then /metrics.
func parseServeStatus(out []byte) (started, now int64, m *serveMetrics) {
	head, body, _ := bytes.Cut(out, []byte("---\n"))
	lines := strings.Fields(string(head))
	if len(lines) >= 2 {
		started, _ = strconv.ParseInt(lines[0], 10, 64)
		now, _ = strconv.ParseInt(lines[1], 10, 64)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return started, now, nil
	}
	m = &serveMetrics{}
	found := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if ok {
			_, rest, ok = strings.Cut(rest, "}")
		} else {
			name, rest, ok = strings.Cut(line, " ")
		}
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		var into *float64
		switch name {
		case "vllm:request_success_total":
			into = &m.RequestsFinished
		case "vllm:num_requests_running":
			into = &m.RequestsRunning
		case "vllm:num_requests_waiting":
			into = &m.RequestsWaiting
		case "vllm:prompt_tokens_total":
			into = &m.PromptTokens
		case "vllm:generation_tokens_total":
			into = &m.GenerationTokens
		}
		if into != nil {
			*into += v
			found = true
		}
	}
	if !found {
		return started, now, nil
	}
	return started, now, m
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
