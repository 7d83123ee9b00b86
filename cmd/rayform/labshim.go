package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/command"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
)

// This file is the package-main glue lab.go (the `rayform lab` command)
// still uses. It goes with lab.go when the lab becomes its own binary
// (rflab).

// Exit codes lab.go returns.
const (
	exitOK    = command.ExitOK
	exitError = command.ExitError
)

// cli is what lab.go's commands receive: the streams and the command's
// Meta (its interrupt handling).
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	m              *command.Meta
}

// runLabCommand runs `rayform lab` with lab.go's cli.
func runLabCommand(ctx context.Context, m *command.Meta, args []string) int {
	return runLab(ctx, &cli{stdin: m.Stdin, stdout: m.View.Stdout(), stderr: m.View.Stderr(), m: m}, args)
}

// setInterruptHandler installs the first-interrupt handler.
func (c *cli) setInterruptHandler(f func()) { c.m.SetInterruptHandler(f) }

// newFlagSet returns a flag set for a lab subcommand whose -help prints
// its usage.
func newFlagSet(c *cli, name, synopsis string) *flag.FlagSet {
	fs := arguments.NewFlagSet(name, func() { c.m.View.SetColor(false) })
	fs.SetOutput(c.stderr)
	fs.Usage = func() { fmt.Fprint(c.stderr, arguments.Usage(fs, synopsis)) }
	return fs
}

// parseFlags parses a lab subcommand's flags; it returns an exit code and
// false when the command should stop (help shown or a flag error).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK, false
		}
		return exitError, false
	}
	return exitOK, true
}

// unescaped is the writer w escapes for (views.Unescaped).
func unescaped(w io.Writer) io.Writer { return views.Unescaped(w) }
