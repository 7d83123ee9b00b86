package arguments

// Plan is rayform plan's command line.
type Plan struct {
	*Run
	// DetailedExitCode is -detailed-exitcode: exit 2 when there are changes.
	DetailedExitCode bool
	// Out is -out FILE: save the plan there.
	Out string
	// RefreshOnly reports only drift.
	RefreshOnly bool
	// Destroy plans the destruction of every resource.
	Destroy bool
}

// ParsePlan parses rayform plan's arguments.
func ParsePlan(args []string) (*Plan, *ParseError) {
	o, p, json := newRun("plan", "plan [options]\n\n  Observe every host over SSH (read-only) and show what apply would change, and why.")
	a := &Plan{Run: o}
	p.fs.BoolVar(&a.DetailedExitCode, "detailed-exitcode", false, "exit 0 when there are no changes, 1 on error, 2 when there are changes")
	p.fs.StringVar(&a.Out, "out", "", "save the plan to `FILE`; \"rayform apply FILE\" applies exactly it, or refuses if the hosts changed since")
	p.fs.BoolVar(&a.RefreshOnly, "refresh-only", false, "report only what changed on the hosts outside rayform (drift); plan no action")
	p.fs.BoolVar(&a.Destroy, "destroy", false, "plan the destruction of every resource, as destroy would (with -target: the targets and what depends on them)")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case a.Destroy && (a.RefreshOnly || len(o.Replace) > 0):
		return a, p.errorf("-destroy cannot be combined with -refresh-only or -replace")
	case p.fs.NArg() > 0:
		return a, p.errorf("plan takes no arguments (got %q)", p.fs.Args())
	}
	return a, nil
}
