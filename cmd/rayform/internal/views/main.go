package views

import (
	"fmt"
	"io"
	"strings"
)

// CommandSynopsis is one command's line in the usage.
type CommandSynopsis struct {
	Name, Synopsis string
}

// Main shows what rayform prints before (or instead of) a command: the
// usage, an unknown command, the second interrupt (human only).
type Main struct{ *View }

// NewMain is the view of rayform's command line.
func NewMain(v *View) *Main { return &Main{View: v} }

// Usage prints the usage, listing cmds (sorted), to stdout or stderr.
func (v *Main) Usage(toStdout bool, cmds []CommandSynopsis) {
	w := v.stderr
	if toStdout {
		w = v.stdout
	}
	usage(w, cmds)
}

func usage(w io.Writer, cmds []CommandSynopsis) {
	fmt.Fprintf(w, "Usage: rayform [global options] <command> [args]\n\nCommands:\n")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.Name, c.Synopsis)
	}
	fmt.Fprint(w, strings.TrimLeft(`
Global options:
  -chdir=DIR        Switch to DIR before running the command.
  -no-color         Disable colour (also NO_COLOR=1).
  -log-level=LEVEL  Log to stderr at LEVEL (also RAYFORM_LOG).
  -version          Print the version.

Run "rayform <command> -help" for a command's options.
`, "\n"))
}

// FlagError prints the global options' flag error and the usage.
func (v *Main) FlagError(err error, cmds []CommandSynopsis) {
	fmt.Fprintln(v.stderr, err)
	usage(v.stderr, cmds)
}

// UnknownCommand says name is no command (suggestion: the one meant,
// perhaps), then prints the usage.
func (v *Main) UnknownCommand(name, suggestion string, cmds []CommandSynopsis) {
	if suggestion != "" {
		fmt.Fprintf(v.stderr, "Error: unknown command %q. Did you mean %q?\n\n", name, suggestion)
	} else {
		fmt.Fprintf(v.stderr, "Error: unknown command %q\n\n", name)
	}
	usage(v.stderr, cmds)
}

// TwoInterrupts says the second interrupt ends the command at once.
func (v *Main) TwoInterrupts() {
	fmt.Fprintln(v.stderr, "\nTwo interrupts received. Exiting immediately. Note that data loss may have occurred.")
}
