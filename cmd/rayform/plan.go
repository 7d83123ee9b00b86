package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/resources"
)

func runPlan(ctx context.Context, c *cli, args []string) int {
	var opts runOptions
	fs := newFlagSet(c, "plan", "plan [options]\n\n  Observe every host over SSH (read-only) and show what apply would change, and why.")
	opts.register(fs)
	detailed := fs.Bool("detailed-exitcode", false, "exit 0 when there are no changes, 1 on error, 2 when there are changes")
	out := fs.String("out", "", "save the plan to `FILE`; \"rayform apply FILE\" applies exactly it, or refuses if the hosts changed since")
	refreshOnly := fs.Bool("refresh-only", false, "report only what changed on the hosts outside rayform (drift); plan no action")
	destroy := fs.Bool("destroy", false, "plan the destruction of every resource, as destroy would (with -target: the targets and what depends on them)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *destroy && (*refreshOnly || len(opts.replace) > 0) {
		fmt.Fprintln(c.stderr, "Error: -destroy cannot be combined with -refresh-only or -replace")
		return exitError
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "Error: plan takes no arguments (got %q)\n", fs.Args())
		return exitError
	}
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	obs, err := s.observeAndPlan(ctx, *refreshOnly)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	if *destroy {
		s.destroyPlan(obs)
	}
	p := obs.result.Plan
	if err := renderPlan(c, &opts, s, obs, *out); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	if *out != "" && len(p.Errors()) == 0 {
		if err := savePlan(s, obs, *out, *destroy); err != nil {
			fmt.Fprintf(c.stderr, "Error: saving the plan: %v\n", err)
			return exitError
		}
	}
	switch {
	case len(p.Errors()) > 0:
		return exitError
	case *detailed && p.HasChanges():
		return exitChanges
	case *detailed && !*destroy && !*refreshOnly:
		// A serve still starting is not converged: apply would wait for
		// it, and fail if it does not answer within its ready_timeout.
		if starting := s.startingServes(obs); len(starting) > 0 {
			if !opts.json {
				for _, w := range starting {
					fmt.Fprintf(c.stdout, "\nNot converged yet: %s is still starting; apply would wait for it to answer (up to its ready_timeout).\n", w.Address)
				}
			}
			return exitChanges
		}
	}
	return exitOK
}

// renderPlan prints the plan as text or NDJSON.
func renderPlan(c *cli, opts *runOptions, s *session, obs *observed, savedTo string) error {
	p := obs.result.Plan
	writeNotes(c.stderr, obs.result.Notes)
	if opts.json {
		return plan.RenderJSON(c.stdout, p, plan.JSONOptions{Version: version})
	}
	fmt.Fprintf(c.stdout, "Observed %d hosts in %s (%s).\n\n", len(obs.facts.Hosts), obs.elapsed.Round(10*time.Millisecond), costSummary(s, obs))
	so := plan.TextOptions{Color: c.color}
	if savedTo != "" && len(p.Errors()) == 0 {
		so.SavedTo = savedTo
	}
	return plan.RenderText(c.stdout, p, so)
}

// costSummary reports the SSH cost of the observation: connections and
// round trips per host.
func costSummary(s *session, obs *observed) string {
	maxRT, handshakes := 0, 0
	for h, n := range obs.facts.RoundTrips {
		if n > maxRT {
			maxRT = n
		}
		if c, ok := s.conns[h]; ok {
			handshakes += c.Stats().Handshakes
		}
	}
	return fmt.Sprintf("%d SSH connections, at most %d round trips per host", handshakes, maxRT)
}

// current gathers what a saved plan commits to.
func current(s *session, obs *observed) planfile.Current {
	cur := planfile.Current{
		RayformVersion: version,
		ConfigFiles:    map[string][]byte{},
		Variables:      map[string]json.RawMessage{},
		Sensitive:      map[string]json.RawMessage{},
		StateLineage:   s.st.Lineage,
		StateSerial:    s.st.Serial,
		Observed:       resources.HostFingerprints(obs.facts),
	}
	for name, f := range s.cfg.Files {
		rel, err := filepath.Rel(s.c.dir, name)
		if err != nil {
			rel = name
		}
		cur.ConfigFiles[rel] = f.Bytes
	}
	for name, v := range s.cfg.Variables {
		if v.Value == cty.NilVal || !v.Value.IsWhollyKnown() || v.Value.IsNull() {
			continue
		}
		b, err := ctyjson.Marshal(v.Value, v.Value.Type())
		if err != nil {
			continue
		}
		if v.Sensitive {
			cur.Sensitive[name] = b
		} else {
			cur.Variables[name] = b
		}
	}
	cur.ObservedFingerprint = planfile.Fingerprint(cur.Observed)
	return cur
}

func planned(opts *runOptions, p *plan.Plan) planfile.Planned {
	c := p.Counts()
	out := planfile.Planned{Targets: append([]string{}, opts.targets...), Replace: append([]string(nil), opts.replace...),
		Summary: planfile.Summary{Add: c.Add, Change: c.Change, Destroy: c.Destroy}}
	for _, ch := range p.Changes {
		if ch.Action != plan.NoOp {
			out.Changes = append(out.Changes, planfile.Change{Addr: ch.Address, Action: string(ch.Action)})
		}
	}
	sort.Slice(out.Changes, func(i, j int) bool { return out.Changes[i].Addr < out.Changes[j].Addr })
	return out
}

// savePlan writes the plan to path, with its text and -json renderings
// for show.
func savePlan(s *session, obs *observed, path string, destroy bool) error {
	pl := planned(s.opts, obs.result.Plan)
	pl.Destroy = destroy
	var txt, js bytes.Buffer
	if err := plan.RenderText(&txt, obs.result.Plan, plan.TextOptions{}); err != nil {
		return err
	}
	if err := plan.RenderJSON(&js, obs.result.Plan, plan.JSONOptions{Version: version}); err != nil {
		return err
	}
	pl.Rendered = txt.String()
	for _, line := range bytes.Split(bytes.TrimSpace(js.Bytes()), []byte("\n")) {
		if len(line) > 0 {
			pl.RenderedJSON = append(pl.RenderedJSON, json.RawMessage(line))
		}
	}
	f, err := planfile.New(current(s, obs), pl, planfile.Options{})
	if err != nil {
		return err
	}
	return planfile.Write(path, f)
}
