package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
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
	// plan -destroy plans the removals only: it depends on nothing a plan
	// of the configuration's changes asks outside the hosts.
	var obs *run.Observation
	var err error
	if *destroy {
		obs, _, err = s.run.ObserveDestroy(ctx)
	} else {
		obs, err = s.run.Observe(ctx, *refreshOnly)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	p := obs.Result.Plan
	if err := renderPlan(c, &opts, s, obs, *out); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	if *out != "" && len(p.Errors()) == 0 {
		if err := s.run.SavePlan(obs, *out, *destroy); err != nil {
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
		if starting := s.run.Starting(obs); len(starting) > 0 {
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
func renderPlan(c *cli, opts *runOptions, s *session, obs *run.Observation, savedTo string) error {
	p := obs.Result.Plan
	writeNotes(c.stderr, obs.Result.Notes)
	if opts.json {
		return plan.RenderJSON(c.stdout, p, plan.JSONOptions{Version: version})
	}
	fmt.Fprintf(c.stdout, "Observed %d hosts in %s (%s).\n\n", len(obs.Facts.Hosts), obs.Elapsed.Round(10*time.Millisecond), costSummary(s, obs))
	so := plan.TextOptions{Color: c.color}
	if savedTo != "" && len(p.Errors()) == 0 {
		so.SavedTo = savedTo
	}
	return plan.RenderText(c.stdout, p, so)
}

// costSummary reports the SSH cost of the observation: connections and
// round trips per host.
func costSummary(s *session, obs *run.Observation) string {
	maxRT, handshakes := 0, 0
	for h, n := range obs.Facts.RoundTrips {
		if n > maxRT {
			maxRT = n
		}
		if c, ok := s.conns[h]; ok {
			handshakes += c.Stats().Handshakes
		}
	}
	return costText(handshakes, maxRT)
}

// costText is costSummary's sentence, its nouns in the number they take.
func costText(handshakes, maxRT int) string {
	return fmt.Sprintf("%d SSH %s, at most %d round %s per host", handshakes, plan.Plural(handshakes, "connection"), maxRT, plan.Plural(maxRT, "trip"))
}
