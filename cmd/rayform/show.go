package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/state"
)

// runShow prints a saved plan as plan printed it (text, or its -json
// events), or, without a file, what the state records.
func runShow(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "show", "show [options] [PLAN]\n\n  Print the saved plan PLAN (from plan -out) as plan showed it, or without PLAN\n  the resources the state records (where each was applied).")
	asJSON := fs.Bool("json", false, "print the plan's -json events (NDJSON), or the state as JSON")
	stateFile := fs.String("state", state.DefaultPath, "local state `FILE`, relative to the configuration directory")
	pos, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 1 {
		fmt.Fprintf(c.stderr, "Error: show takes at most one argument, a saved plan (got %q)\n", pos)
		return exitError
	}
	if len(pos) == 0 {
		return showState(c, *stateFile, *asJSON)
	}
	f, err := planfile.Read(pos[0])
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	if *asJSON {
		if len(f.RenderedJSON) == 0 {
			fmt.Fprintf(c.stderr, "Error: %s holds no rendered plan (it was saved by an older rayform)\n", pos[0])
			return exitError
		}
		for _, e := range f.RenderedJSON {
			// The file is indented; each event is one line, as plan -json
			// printed it.
			var line bytes.Buffer
			if err := json.Compact(&line, e); err != nil {
				fmt.Fprintf(c.stderr, "Error: %s: %v\n", pos[0], err)
				return exitError
			}
			fmt.Fprintf(c.stdout, "%s\n", line.Bytes())
		}
		return exitOK
	}
	fmt.Fprintf(c.stdout, "Saved plan %s, made %s by rayform v%s against state serial %d.\n",
		pos[0], f.CreatedAt.Format("2006-01-02 15:04:05 MST"), f.RayformVersion, f.StateSerial)
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
		fmt.Fprintf(c.stdout, "Options: %s\n", strings.Join(opts, " "))
	}
	fmt.Fprintln(c.stdout)
	if f.Rendered != "" {
		fmt.Fprint(c.stdout, f.Rendered)
		return exitOK
	}
	for _, ch := range f.Changes {
		fmt.Fprintf(c.stdout, "  %s: %s\n", ch.Addr, ch.Action)
	}
	fmt.Fprintf(c.stdout, "\nPlan: %d to add, %d to change, %d to destroy.\n", f.Summary.Add, f.Summary.Change, f.Summary.Destroy)
	return exitOK
}

// showState prints the resources the state records.
func showState(c *cli, stateFile string, asJSON bool) int {
	st, err := state.Load(c.statePath(stateFile))
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	if asJSON {
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	if len(st.Addresses()) == 0 {
		fmt.Fprintln(c.stdout, "The state is empty: nothing has been applied.")
		return exitOK
	}
	fmt.Fprintf(c.stdout, "Project %s, state serial %d.\n", st.Project, st.Serial)
	for _, addr := range st.Addresses() {
		r, _ := st.Get(addr)
		fmt.Fprintf(c.stdout, "\n# %s (applied %s)\n", addr, r.AppliedAt.Format("2006-01-02 15:04:05 MST"))
		if r.Container != "" {
			fmt.Fprintf(c.stdout, "    container = %q\n", r.Container)
		}
		for _, h := range r.Hosts {
			line := fmt.Sprintf("    host %s = %s", h.Node, h.Host)
			if h.FabricAddress != "" {
				line += fmt.Sprintf(" (fabric %s on %s)", h.FabricAddress, h.FabricInterface)
			}
			fmt.Fprintln(c.stdout, line)
		}
	}
	return exitOK
}
