package arguments

import "strings"

// Graph is rayform graph's command line.
type Graph struct {
	Common
	Vars Vars
}

// ParseGraph parses rayform graph's arguments.
func ParseGraph(args []string) (*Graph, *ParseError) {
	a := &Graph{}
	p := newCommand("graph", "graph [options]", &a.Common)
	a.Vars.register(p.fs)
	switch err := p.parse(args); {
	case err != nil:
		return a, err
	case p.fs.NArg() > 0:
		return a, p.errorf("graph takes no arguments (got %q); use -chdir=DIR to graph another directory", strings.Join(p.fs.Args(), " "))
	}
	return a, nil
}
