package arguments

import (
	"flag"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"
)

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
