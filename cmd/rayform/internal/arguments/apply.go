package arguments

// Apply is rayform apply's command line.
type Apply struct {
	*Run
	// AutoApprove skips the interactive confirmation.
	AutoApprove bool
	// NotAtomic is -atomic=false: a failed replaced serve is left as it is.
	NotAtomic bool
	// PlanPath is the saved plan to apply ("" for none).
	PlanPath string
}

// ParseApply parses rayform apply's arguments.
func ParseApply(args []string) (*Apply, *ParseError) {
	o, p, json := newRun("apply", "apply [options] [PLAN]\n\n  Observe the hosts, show the plan, ask for confirmation, and make the hosts\n  match the configuration, verifying every step. With PLAN (from plan -out),\n  apply exactly that plan, or refuse if the hosts changed since.")
	a := &Apply{Run: o}
	p.fs.BoolVar(&a.AutoApprove, "auto-approve", false, "skip the interactive confirmation")
	p.fs.BoolVar(&o.RotateToken, "rotate-token", false, "make each cluster's authentication token anew under its lock (the plan then replaces the clusters that demand the old one)")
	atomic := p.fs.Bool("atomic", true, "when a replaced vllm_serve fails to become healthy, put back the serve that ran before it and wait for it to answer (apply still fails); -atomic=false leaves the failed serve as it is")
	o.registerLock(p.fs, "applying")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	a.NotAtomic = !*atomic
	a.PlanPath = p.fs.Arg(0)
	switch {
	case err != nil:
		return a, err
	case p.fs.NArg() > 1:
		return a, p.errorf("apply takes at most one argument, a saved plan (got %q)", p.fs.Args())
	}
	if why := o.noPromptReason(); why != "" && !a.AutoApprove && a.PlanPath == "" {
		return a, p.errorf("Plan file or auto-approve required\n\nrayform cannot ask for interactive approval when %s. Use -auto-approve or apply a saved plan.", why)
	}
	return a, nil
}
