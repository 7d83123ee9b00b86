package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/termtext"
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
	opts.readOnly = true
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	view := newStatusView(c.stdout, opts.json, *watch > 0)
	for {
		rep, err := s.status(ctx)
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		if err := view.Show(rep); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
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

// status observes the hosts once, with plan's probe plus what the kinds
// show in status (kind.Observation.Status: each serve's /metrics and start
// time), and builds the report (run.Status).
func (s *session) status(ctx context.Context) (*run.StatusReport, error) {
	s.statusProbes = true
	obs, err := s.observeAndPlan(ctx, false)
	if err != nil {
		return nil, err
	}
	return run.Status(s.run.Kinds, s.project, &run.Observation{Facts: obs.facts, Config: obs.cfg, Result: obs.result}), nil
}

// statusView shows status's report: for a person (statusText) or as JSON
// (statusJSONView), chosen once per command.
type statusView interface {
	Show(rep *run.StatusReport) error
}

// newStatusView is the view -json chooses; watch clears the screen before
// each text report.
func newStatusView(w io.Writer, json, watch bool) statusView {
	if json {
		return statusJSONView{w: w}
	}
	return statusText{w: w, watch: watch}
}

// statusJSONView prints the report as one indented JSON document.
type statusJSONView struct{ w io.Writer }

func (v statusJSONView) Show(rep *run.StatusReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(v.w, "%s\n", b)
	return err
}

// statusText prints the report as text, on a cleared screen with watch.
type statusText struct {
	w     io.Writer
	watch bool
}

func (v statusText) Show(r *run.StatusReport) error {
	if v.watch {
		termtext.Control(v.w, "\x1b[H\x1b[2J") // rayform's own control: it passes the escaper
	}
	renderStatus(v.w, r)
	return nil
}

// renderStatus prints the report as text.
func renderStatus(w io.Writer, r *run.StatusReport) {
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
		if n.GPUSimulator != "" {
			// nvidia-smi said so itself (the lab's simnode): the GPUs
			// and their memory figures are not a real machine's.
			gpus += " (simulated)"
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
