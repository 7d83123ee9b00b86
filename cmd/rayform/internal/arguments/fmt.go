package arguments

import "slices"

// Fmt is rayform fmt's command line.
type Fmt struct {
	Common
	// List prints the name of each file whose formatting changed.
	List bool
	// Write rewrites changed files in place.
	Write bool
	// Diff prints a unified diff of each change.
	Diff bool
	// Check writes nothing; exit 3 if any file needs formatting.
	Check bool
	// Recursive descends into subdirectories.
	Recursive bool
	// Paths are the files and directories named ("-": stdin; none: the
	// configuration directory).
	Paths []string
}

// ParseFmt parses rayform fmt's arguments.
func ParseFmt(args []string) (*Fmt, *ParseError) {
	a := &Fmt{}
	p := newCommand("fmt", "fmt [options] [PATH...]\n\n"+
		"  Rewrites *.hcl files to canonical format. PATH is a file or a directory\n"+
		"  (default: the current directory); \"-\" reads stdin and writes stdout.", &a.Common)
	p.fs.BoolVar(&a.List, "list", true, "list files whose formatting differs")
	p.fs.BoolVar(&a.Write, "write", true, "write the result to the source file instead of stdout")
	p.fs.BoolVar(&a.Diff, "diff", false, "display diffs of formatting changes")
	p.fs.BoolVar(&a.Check, "check", false, "check whether input is formatted; write nothing, exit 3 if not")
	p.fs.BoolVar(&a.Recursive, "recursive", false, "also process files in subdirectories")
	if err := p.parse(args); err != nil {
		return a, err
	}
	if a.Check {
		a.Write = false
	}
	a.Paths = p.fs.Args()
	if slices.Contains(a.Paths, "-") && len(a.Paths) > 1 {
		return a, p.errorf(`"-" (stdin) cannot be combined with other paths`)
	}
	return a, nil
}
