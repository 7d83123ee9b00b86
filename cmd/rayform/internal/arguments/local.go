package arguments

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/rayform/rayform/engine/state"
)

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

// Show is rayform show's command line.
type Show struct {
	Common
	// ViewType is ViewJSON with -json.
	ViewType ViewType
	// StateFile is the local state file.
	StateFile string
	// PlanPath is the saved plan to show ("": the state).
	PlanPath string
}

// ParseShow parses rayform show's arguments.
func ParseShow(args []string) (*Show, *ParseError) {
	a := &Show{}
	p := newCommand("show", "show [options] [PLAN]\n\n  Print the saved plan PLAN (from plan -out) as plan showed it, or without PLAN\n  the resources the state records (where each was applied).", &a.Common)
	json := p.fs.Bool("json", false, "print the plan's -json events (NDJSON), or the state as JSON")
	p.fs.StringVar(&a.StateFile, "state", state.DefaultPath, "local state `FILE`, relative to the configuration directory")
	pos, err := p.parseInterspersed(args)
	a.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case len(pos) > 1:
		return a, p.errorf("show takes at most one argument, a saved plan (got %q)", pos)
	case len(pos) == 1:
		a.PlanPath = pos[0]
	}
	return a, nil
}

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

// Global is the command line before the command: the global options, the
// command's name and its arguments.
type Global struct {
	// Chdir is the directory to switch to before running the command.
	Chdir string
	// NoColor turns colour off.
	NoColor bool
	// LogLevel is the level of the log on stderr ("": off).
	LogLevel string
	// Version asks for the version.
	Version bool
	// Command is the command's name ("" when none was given).
	Command string
	// Args are the command's arguments.
	Args []string
}

// ParseGlobal parses the global options; logLevel is the default of
// -log-level (RAYFORM_LOG). The ParseError's Usage is empty: the command
// list is the usage, which the caller prints.
func ParseGlobal(args []string, logLevel string) (*Global, *ParseError) {
	g := &Global{}
	fs := flag.NewFlagSet("rayform", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&g.Chdir, "chdir", "", "switch to `DIR` before running the command")
	fs.BoolVar(&g.NoColor, "no-color", false, "disable colour in output")
	fs.StringVar(&g.LogLevel, "log-level", logLevel, "log `LEVEL` on stderr: trace, debug, info, warn, error, off")
	fs.BoolVar(&g.Version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return g, newFlagError(err, "")
	}
	if rest := fs.Args(); len(rest) > 0 {
		g.Command, g.Args = rest[0], rest[1:]
	}
	return g, nil
}

// Level is the log level -log-level names (hclog.Off when none).
func (g *Global) Level() (hclog.Level, error) {
	if g.LogLevel == "" {
		return hclog.Off, nil
	}
	level := hclog.LevelFromString(g.LogLevel)
	if level == hclog.NoLevel {
		return level, fmt.Errorf("invalid log level %q (want trace, debug, info, warn, error or off)", g.LogLevel)
	}
	return level, nil
}
