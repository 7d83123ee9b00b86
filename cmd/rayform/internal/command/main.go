// Package command holds rayform's commands, as Terraform's
// internal/command does: each command parses its arguments
// (internal/arguments), does its work through the engine and the
// resources, and shows everything through its view (internal/views).
// Main is the whole command line: cmd/rayform's main calls it.
package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/termtext"
)

// Exit codes shared by every command.
const (
	ExitOK    = 0
	ExitError = 1
	// ExitChanges is plan -detailed-exitcode's: changes present.
	ExitChanges = 2
	// ExitFmt is fmt -check's: files need formatting.
	ExitFmt = 3
	// ExitUnhealthy is status's exit code for a cluster that is not
	// healthy.
	ExitUnhealthy = 2
	// ExitCause is diagnose's exit code when a known failure was found:
	// the command ran fine, and what it read shows a cause (as plan
	// -detailed-exitcode's 2 means "succeeded, and something to act
	// on"). 0 is a log with no known failure, 1 an input that could not
	// be read.
	ExitCause = 2
)

// Meta is what every command receives: stdin, the view of the streams,
// the configuration directory, the logger and the interrupt handling.
type Meta struct {
	// Stdin is where prompts read their answers.
	Stdin io.Reader
	// View holds stdout, stderr and the colour.
	View    *views.View
	dir     string
	log     hclog.Logger
	version string
	// onInterrupt, when a command sets it, is called on the first Ctrl-C
	// instead of cancelling the command's context; the second Ctrl-C
	// always cancels it.
	onInterrupt func()
	mu          sync.Mutex
}

// Command is one subcommand.
type Command struct {
	Name     string
	Synopsis string
	Run      func(ctx context.Context, m *Meta, args []string) int
}

// Options are what Main runs with besides the command line.
type Options struct {
	// Version is rayform's version.
	Version string
}

// commands lists every built-in subcommand. Each lives in its own file.
func commands() []Command {
	return []Command{
		{"validate", "Check the configuration for errors", runValidate},
		{"plan", "Observe the hosts and show what apply would change", runPlan},
		{"apply", "Make the hosts match the configuration, verifying every step", runApply},
		{"destroy", "Stop and remove everything rayform created", runDestroy},
		{"check", "Run the data-plane check (torch c10d, Gloo, NCCL) on running clusters", runCheck},
		{"force-unlock", "Free a cluster's lock whose holder is gone", runForceUnlock},
		{"fmt", "Rewrite configuration files to canonical format", runFmt},
		{"graph", "Print the dependency graph in DOT format", runGraph},
		{"output", "Print the outputs of the last apply, without contacting hosts", runOutput},
		{"show", "Print a saved plan (or the state's resources), as text or JSON", runShow},
		{"status", "Observe the hosts once and show the clusters' and serves' health", runStatus},
		{"logs", "Print or follow a serve's or a cluster's logs, prefixed by node", runLogs},
		{"diagnose", "Name the root cause of a failure from its logs (files or stdin), with the fix", runDiagnose},
		{"version", "Print the rayform version", runVersion},
	}
}

// Main runs rayform's command line and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, o Options) int {
	// Everything rayform prints passes through one escaper (termtext):
	// text from hosts, the hub, logs and remote errors reaches the
	// terminal with its controls escaped, whatever path it took.
	tty := views.IsTerminal(stdout)
	outw, errw := termtext.NewWriter(stdout), termtext.NewWriter(stderr)
	defer outw.Flush()
	defer errw.Flush()
	m := &Meta{Stdin: stdin, View: views.NewView(outw, errw), dir: ".", version: o.Version}
	cmds := commands()
	mv := views.NewMain(m.View)
	g, perr := arguments.ParseGlobal(args, os.Getenv("RAYFORM_LOG"))
	switch {
	case perr != nil && perr.Help:
		mv.Usage(false, synopses(cmds))
		return ExitOK
	case perr != nil:
		mv.FlagError(perr.Flag, synopses(cmds))
		return ExitError
	case g.Version:
		views.NewVersion(m.View).Version(o.Version)
		return ExitOK
	case g.Command == "":
		mv.Usage(false, synopses(cmds))
		return ExitError
	}
	if code, ok := m.setUp(g, tty); !ok {
		return code
	}
	return m.dispatch(g, cmds, mv)
}

// setUp applies the global options: the directory, the log, the colour.
func (m *Meta) setUp(g *arguments.Global, tty bool) (int, bool) {
	if g.Chdir != "" {
		if err := os.Chdir(g.Chdir); err != nil {
			m.View.Error(fmt.Errorf("-chdir: %w", err))
			return ExitError, false
		}
	}
	level, err := g.Level()
	if err != nil {
		m.View.Error(err)
		return ExitError, false
	}
	m.log = hclog.New(&hclog.LoggerOptions{Name: "rayform", Level: level, Output: m.View.Stderr()})
	m.View.SetColor(!g.NoColor && os.Getenv("NO_COLOR") == "" && tty)
	return ExitOK, true
}

// dispatch runs the command g names, or says there is none.
func (m *Meta) dispatch(g *arguments.Global, cmds []Command, mv *views.Main) int {
	name := g.Command
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		mv.Usage(true, synopses(cmds))
		return ExitOK
	}
	for _, cmd := range cmds {
		if cmd.Name == name {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := m.handleSignals(cancel, mv)
			defer stop()
			return cmd.Run(ctx, m, g.Args)
		}
	}
	names := make([]string, 0, len(cmds))
	for _, cmd := range cmds {
		names = append(names, cmd.Name)
	}
	sort.Strings(names)
	mv.UnknownCommand(name, config.Suggest(name, names), synopses(cmds))
	return ExitError
}

// synopses are the commands' lines of the usage, sorted by name.
func synopses(cmds []Command) []views.CommandSynopsis {
	out := make([]views.CommandSynopsis, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, views.CommandSynopsis{Name: c.Name, Synopsis: c.Synopsis})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetInterruptHandler installs the first-interrupt handler.
func (m *Meta) SetInterruptHandler(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onInterrupt = f
}

// handleSignals cancels ctx on the second interrupt (or on the first when
// no handler is installed).
func (m *Meta) handleSignals(cancel context.CancelFunc, mv *views.Main) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		count := 0
		for {
			select {
			case <-done:
				return
			case <-sigs:
				count++
				m.mu.Lock()
				h := m.onInterrupt
				m.mu.Unlock()
				if count == 1 && h != nil {
					h()
					continue
				}
				if count >= 2 && h != nil {
					mv.TwoInterrupts()
				}
				cancel()
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// statePath resolves a -state FILE: relative to the configuration
// directory unless absolute.
func (m *Meta) statePath(file string) string {
	if filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(m.dir, file)
}

// parsed is a command's parsed command line.
type parsed interface {
	CommonFlags() *arguments.Common
}

// parse parses a command's arguments with the command's parse function
// and applies the flags every command takes (-no-color). When the parse
// stops the command (-help, a bad flag or argument), the view says why
// and ok is false, with the exit code.
func parse[T parsed](m *Meta, parse func([]string) (T, *arguments.ParseError), args []string) (a T, code int, ok bool) {
	a, perr := parse(args)
	if a.CommonFlags().NoColor {
		m.View.SetColor(false)
	}
	if perr != nil {
		return a, m.View.ParseError(perr), false
	}
	return a, ExitOK, true
}
