package arguments

// Diagnose is rayform diagnose's command line.
type Diagnose struct {
	Common
	// ViewType is ViewJSON with -json.
	ViewType ViewType
	// Paths are the logs to read ("-": stdin), stdin when none is named.
	Paths []string
}

// ParseDiagnose parses rayform diagnose's arguments.
func ParseDiagnose(args []string) (*Diagnose, *ParseError) {
	a := &Diagnose{}
	p := newCommand("diagnose", `diagnose [-json] [FILE|-]...

  Reads the logs (files; "-" or no argument: stdin), names the root cause of
  the failure they show with the evidence lines and the fix. The logs of
  several hosts of one failure go together. Needs no configuration.
  Secrets in the logs (tokens, Authorization headers, passwords) are masked.

  Exit codes: 0 no known failure found, 2 a cause found, 1 an input could not
  be read.`, &a.Common)
	json := p.fs.Bool("json", false, "print one JSON object instead of text")
	paths, err := p.parseInterspersed(args)
	a.ViewType = viewType(*json)
	if err != nil {
		return a, err
	}
	a.Paths = paths
	if len(a.Paths) == 0 {
		a.Paths = []string{"-"}
	}
	return a, nil
}
