package arguments

// Unlock is rayform force-unlock's command line.
type Unlock struct {
	*Run
	// Force skips the confirmation.
	Force bool
	// Resource names the locked resource: its name or its address.
	Resource string
}

// ParseUnlock parses rayform force-unlock's arguments.
func ParseUnlock(args []string) (*Unlock, *ParseError) {
	o, p, json := newRun("force-unlock", "force-unlock [options] CLUSTER\n\n  Show who holds the lock of ray_cluster.CLUSTER on its head host and, after\n  confirmation, stop that holder so the lock is free. Only for a holder you know\n  is gone: a holder that vanished loses the lock by itself when its lease\n  expires.")
	a := &Unlock{Run: o}
	p.fs.BoolVar(&a.Force, "force", false, "do not ask for confirmation")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case p.fs.NArg() != 1:
		return a, p.errorf("force-unlock takes one argument, the ray_cluster's name")
	}
	a.Resource = p.fs.Arg(0)
	return a, nil
}
