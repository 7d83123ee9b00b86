// Package arguments parses each rayform command's command line into a
// typed value, as Terraform's internal/command/arguments does: one Parse
// function per command, printing nothing. What the parse found wrong (or a
// request for help) comes back as a *ParseError, which the command's view
// prints.
package arguments

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ViewType is how a command renders its output: for a person or as JSON.
type ViewType int

const (
	// ViewHuman renders text for a person.
	ViewHuman ViewType = iota
	// ViewJSON renders machine-readable JSON (or NDJSON events).
	ViewJSON
)

// viewType is the view -json chooses.
func viewType(json bool) ViewType {
	if json {
		return ViewJSON
	}
	return ViewHuman
}

// ParseError is why a parse stopped the command: a request for help, a
// flag the flag package refused, or arguments that do not fit the command.
type ParseError struct {
	// Help is set when -h or -help asked for the usage: not a failure.
	Help bool
	// Flag is the flag package's error (an unknown flag, a bad value),
	// shown with the usage.
	Flag error
	// Err says why the arguments do not fit the command.
	Err error
	// Usage is the command's usage, as -help prints it.
	Usage string
}

func (e *ParseError) Error() string {
	switch {
	case e.Help:
		return "help requested"
	case e.Flag != nil:
		return e.Flag.Error()
	}
	return e.Err.Error()
}

// Common are the flags every command takes.
type Common struct {
	// NoColor is -no-color given after the command (it is also a global
	// option): colour off.
	NoColor bool
}

// CommonFlags returns the common flags (every command's parsed value
// has them).
func (c *Common) CommonFlags() *Common { return c }

// NewFlagSet returns a flag set for command name that prints nothing
// itself (its output is io.Discard until the caller sets one), with
// -no-color, which calls noColor when set to true.
func NewFlagSet(name string, noColor func()) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// -no-color is global, but Terraform users put it after the command.
	fs.BoolFunc("no-color", "disable colour in output (also a global option, and NO_COLOR=1)", func(v string) error {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		if off {
			noColor()
		}
		return nil
	})
	return fs
}

// Usage is the usage -help prints for a command: the synopsis and fs's
// flags with their defaults.
func Usage(fs *flag.FlagSet, synopsis string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: rayform %s\n\n", synopsis)
	fmt.Fprintln(&b, "Options:")
	old := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(old)
	return b.String()
}

// command is one command's flag set and synopsis, being parsed.
type command struct {
	fs       *flag.FlagSet
	synopsis string
}

// newCommand starts the parse of a command whose common flags go to c.
func newCommand(name, synopsis string, c *Common) *command {
	return &command{fs: NewFlagSet(name, func() { c.NoColor = true }), synopsis: synopsis}
}

// parse parses args (flags first, then the positional arguments).
func (p *command) parse(args []string) *ParseError {
	if err := p.fs.Parse(args); err != nil {
		return p.flagError(err)
	}
	return nil
}

// parseInterspersed is parse for commands that take positional arguments
// (logs ADDRESS, output NAME, show PLAN): flags may come before or after
// them, as people type them (rayform logs vllm_serve.qwen -f). The
// positional arguments are returned in order; "--" ends the flags.
func (p *command) parseInterspersed(args []string) ([]string, *ParseError) {
	var pos []string
	for {
		if err := p.parse(args); err != nil {
			return nil, err
		}
		rest := p.fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError is the ParseError of the flag package's err.
func (p *command) flagError(err error) *ParseError {
	return newFlagError(err, Usage(p.fs, p.synopsis))
}

// newFlagError is the ParseError of the flag package's err, with usage.
func newFlagError(err error, usage string) *ParseError {
	e := &ParseError{Usage: usage}
	if errors.Is(err, flag.ErrHelp) {
		e.Help = true
	} else {
		e.Flag = err
	}
	return e
}

// errorf is the ParseError of arguments that do not fit the command.
func (p *command) errorf(format string, args ...any) *ParseError {
	return &ParseError{Err: fmt.Errorf(format, args...), Usage: Usage(p.fs, p.synopsis)}
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
