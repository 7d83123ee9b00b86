package arguments

import "github.com/rayform/rayform/engine/state"

// Output is rayform output's command line.
type Output struct {
	Common
	Vars Vars
	// ViewType is ViewJSON with -json.
	ViewType ViewType
	// Raw prints one value as is (-raw).
	Raw bool
	// StateFile is the local state file.
	StateFile string
	// Name is the output to print ("" for all).
	Name string
}

// ParseOutput parses rayform output's arguments.
func ParseOutput(args []string) (*Output, *ParseError) {
	a := &Output{}
	p := newCommand("output", "output [options] [NAME]\n\n  Print the outputs (or the output NAME) as the last apply left them, from the\n  configuration and the state, without contacting any host.", &a.Common)
	a.Vars.register(p.fs)
	json := p.fs.Bool("json", false, "print the outputs as JSON: {\"NAME\": {\"sensitive\": BOOL, \"type\": TYPE, \"value\": VALUE}}, or NAME's value")
	p.fs.BoolVar(&a.Raw, "raw", false, "print NAME's value as is, without quotes (strings, numbers and bools only), for shell scripts")
	p.fs.StringVar(&a.StateFile, "state", state.DefaultPath, "local state `FILE`, relative to the configuration directory")
	pos, err := p.parseInterspersed(args)
	a.ViewType = viewType(*json)
	if len(pos) > 0 {
		a.Name = pos[0]
	}
	switch {
	case err != nil:
		return a, err
	case len(pos) > 1:
		return a, p.errorf("output takes at most one argument, an output's name (got %q)", pos)
	case a.Raw && a.Name == "":
		return a, p.errorf("-raw needs an output name: rayform output -raw NAME")
	case a.Raw && *json:
		return a, p.errorf("-raw and -json cannot be combined")
	}
	return a, nil
}
