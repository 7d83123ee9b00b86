package arguments

import "strings"

// Validate is rayform validate's command line.
type Validate struct {
	Common
	Vars Vars
	// ViewType is ViewJSON with -json.
	ViewType ViewType
}

// ParseValidate parses rayform validate's arguments.
func ParseValidate(args []string) (*Validate, *ParseError) {
	a := &Validate{}
	p := newCommand("validate", "validate [options]", &a.Common)
	json := p.fs.Bool("json", false, "print the result as JSON (Terraform's validate -json shape)")
	a.Vars.register(p.fs)
	err := p.parse(args)
	a.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case p.fs.NArg() > 0:
		return a, p.errorf("validate takes no arguments (got %q); use -chdir=DIR to validate another directory", strings.Join(p.fs.Args(), " "))
	}
	return a, nil
}
