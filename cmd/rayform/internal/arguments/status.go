package arguments

import "time"

// Status is rayform status' command line.
type Status struct {
	*Run
	// Watch, when positive, refreshes the terminal every Watch.
	Watch time.Duration
}

// ParseStatus parses rayform status' arguments.
func ParseStatus(args []string) (*Status, *ParseError) {
	o, p, json := newRun("status", "status [options]\n\n  Observe the hosts once (read-only) and show nodes, containers, Ray's node\n  table and each serve's health, model, uptime, requests and tokens. Exits 0\n  when everything is healthy and as configured, 2 when not, 1 on error.")
	a := &Status{Run: o}
	p.fs.DurationVar(&a.Watch, "watch", 0, "on a terminal, refresh every `D` (e.g. 5s) until interrupted")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case p.fs.NArg() > 0:
		return a, p.errorf("status takes no arguments (got %q)", p.fs.Args())
	}
	return a, nil
}
