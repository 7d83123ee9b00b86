package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/state"
)

// Show shows a saved plan or the state: as plan printed it and as a list
// for a person (ShowHuman), or as plan -json's events and the state's
// JSON (ShowJSON).
type Show interface {
	// Plan shows the saved plan f, read from path.
	Plan(path string, f *planfile.File) error
	// State shows the resources the state records.
	State(st *state.State) error
	Error(err error)
}

// NewShow is the show view vt chooses.
func NewShow(vt arguments.ViewType, v *View) Show {
	if vt == arguments.ViewJSON {
		return &ShowJSON{View: v}
	}
	return &ShowHuman{View: v}
}

// ShowHuman prints a saved plan as plan printed it, and the state's
// resources as a list.
type ShowHuman struct{ *View }

// Plan prints the plan's header, options and rendering.
func (v *ShowHuman) Plan(path string, f *planfile.File) error {
	fmt.Fprintf(v.stdout, "Saved plan %s, made %s by rayform v%s against state serial %d.\n",
		path, f.CreatedAt.Format("2006-01-02 15:04:05 MST"), f.RayformVersion, f.StateSerial)
	var opts []string
	if f.Destroy {
		opts = append(opts, "-destroy")
	}
	for _, t := range f.Targets {
		opts = append(opts, "-target="+t)
	}
	for _, r := range f.Replace {
		opts = append(opts, "-replace="+r)
	}
	if len(opts) > 0 {
		fmt.Fprintf(v.stdout, "Options: %s\n", strings.Join(opts, " "))
	}
	fmt.Fprintln(v.stdout)
	if f.Rendered != "" {
		fmt.Fprint(v.stdout, f.Rendered)
		return nil
	}
	for _, ch := range f.Changes {
		fmt.Fprintf(v.stdout, "  %s: %s\n", ch.Addr, ch.Action)
	}
	fmt.Fprintf(v.stdout, "\nPlan: %d to add, %d to change, %d to destroy.\n", f.Summary.Add, f.Summary.Change, f.Summary.Destroy)
	return nil
}

// State prints the resources the state records, where each was applied.
func (v *ShowHuman) State(st *state.State) error {
	if len(st.Addresses()) == 0 {
		fmt.Fprintln(v.stdout, "The state is empty: nothing has been applied.")
		return nil
	}
	fmt.Fprintf(v.stdout, "Project %s, state serial %d.\n", st.Project, st.Serial)
	for _, addr := range st.Addresses() {
		r, _ := st.Get(addr)
		fmt.Fprintf(v.stdout, "\n# %s (applied %s)\n", addr, r.AppliedAt.Format("2006-01-02 15:04:05 MST"))
		if r.Container != "" {
			fmt.Fprintf(v.stdout, "    container = %q\n", r.Container)
		}
		for _, h := range r.Hosts {
			line := fmt.Sprintf("    host %s = %s", h.Node, h.Host)
			if h.FabricAddress != "" {
				line += fmt.Sprintf(" (fabric %s on %s)", h.FabricAddress, h.FabricInterface)
			}
			fmt.Fprintln(v.stdout, line)
		}
	}
	return nil
}

// ShowJSON prints a saved plan's -json events and the state as JSON.
type ShowJSON struct{ *View }

// Plan prints the events plan -json printed, one a line.
func (v *ShowJSON) Plan(path string, f *planfile.File) error {
	if len(f.RenderedJSON) == 0 {
		return fmt.Errorf("%s holds no rendered plan (it was saved by an older rayform)", path)
	}
	for _, e := range f.RenderedJSON {
		// The file is indented; each event is one line, as plan -json
		// printed it.
		var line bytes.Buffer
		if err := json.Compact(&line, e); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(v.stdout, "%s\n", line.Bytes())
	}
	return nil
}

// State prints the state as indented JSON.
func (v *ShowJSON) State(st *state.State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(v.stdout, "%s\n", b)
	return nil
}
