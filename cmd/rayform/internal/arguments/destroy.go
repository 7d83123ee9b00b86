package arguments

// Destroy is rayform destroy's command line.
type Destroy struct {
	*Run
	// AutoApprove skips the interactive confirmation.
	AutoApprove bool
}

// ParseDestroy parses rayform destroy's arguments.
func ParseDestroy(args []string) (*Destroy, *ParseError) {
	o, p, json := newRun("destroy", "destroy [options]\n\n  Stop every vllm serve process and remove every container rayform created for\n  this configuration (and for resources removed from it), serves first. Containers\n  rayform did not create are never touched.")
	a := &Destroy{Run: o}
	p.fs.BoolVar(&a.AutoApprove, "auto-approve", false, "skip the interactive confirmation")
	o.registerLock(p.fs, "destroying")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case len(o.Replace) > 0:
		return a, p.errorf("destroy does not take -replace")
	case p.fs.NArg() > 0:
		return a, p.errorf("destroy takes no arguments (got %q)", p.fs.Args())
	}
	if why := o.noPromptReason(); why != "" && !a.AutoApprove {
		return a, p.errorf("-auto-approve required\n\nrayform cannot ask for interactive approval when %s.", why)
	}
	return a, nil
}
