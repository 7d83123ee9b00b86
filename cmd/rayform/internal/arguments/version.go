package arguments

// Version is rayform version's command line.
type Version struct {
	Common
}

// ParseVersion parses rayform version's arguments.
func ParseVersion(args []string) (*Version, *ParseError) {
	a := &Version{}
	p := newCommand("version", "version\n\n  Print the rayform version.", &a.Common)
	return a, p.parse(args)
}
