package views

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/termtext"
)

// Status shows status's report: for a person (StatusHuman) or as JSON
// (StatusJSON).
type Status interface {
	Show(rep *run.StatusReport) error
	Error(err error)
}

// NewStatus is the status view vt chooses; watch clears the screen before
// each text report.
func NewStatus(vt arguments.ViewType, v *View, watch bool) Status {
	if vt == arguments.ViewJSON {
		return &StatusJSON{View: v}
	}
	return &StatusHuman{View: v, watch: watch}
}

// StatusJSON prints the report as one indented JSON document.
type StatusJSON struct{ *View }

// Show prints the report.
func (v *StatusJSON) Show(rep *run.StatusReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(v.stdout, "%s\n", b)
	return err
}

// StatusHuman prints the report as text, on a cleared screen with watch.
type StatusHuman struct {
	*View
	watch bool
}

// Show prints the report.
func (v *StatusHuman) Show(r *run.StatusReport) error {
	if v.watch {
		termtext.Control(v.stdout, "\x1b[H\x1b[2J") // rayform's own control: it passes the escaper
	}
	renderStatus(v.stdout, r)
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
