package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/term"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/termtext"
)

// Exit codes shared by every command.
const (
	exitOK      = 0
	exitError   = 1
	exitChanges = 2 // plan -detailed-exitcode: changes present
	exitFmt     = 3 // fmt -check: files need formatting
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// cli is what every command receives: streams, global options and a logger.
// statePath resolves a -state FILE: relative to the configuration
// directory unless absolute.
func (c *cli) statePath(file string) string {
	if filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(c.dir, file)
}

type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	color          bool // colour allowed on stdout/stderr (TTY, no -no-color, no NO_COLOR)
	dir            string
	log            hclog.Logger
	// onInterrupt, when a command sets it, is called on the first Ctrl-C
	// instead of cancelling the command's context; the second Ctrl-C
	// always cancels it.
	onInterrupt func()
	mu          sync.Mutex
}

// setInterruptHandler installs the first-interrupt handler.
func (c *cli) setInterruptHandler(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onInterrupt = f
}

// handleSignals cancels ctx on the second interrupt (or on the first when
// no handler is installed).
func (c *cli) handleSignals(cancel context.CancelFunc) (stop func()) {
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
				c.mu.Lock()
				h := c.onInterrupt
				c.mu.Unlock()
				if count == 1 && h != nil {
					h()
					continue
				}
				if count >= 2 && h != nil {
					fmt.Fprintln(c.stderr, "\nTwo interrupts received. Exiting immediately. Note that data loss may have occurred.")
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

// command is one subcommand.
type command struct {
	name     string
	synopsis string
	run      func(ctx context.Context, c *cli, args []string) int
}

// commands lists every subcommand. Each lives in its own file.
func commands() []command {
	return []command{
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

func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Everything rayform prints passes through one escaper (termtext):
	// text from hosts, the hub, logs and remote errors reaches the
	// terminal with its controls escaped, whatever path it took.
	tty := isTerminal(stdout)
	outw, errw := termtext.NewWriter(stdout), termtext.NewWriter(stderr)
	defer outw.Flush()
	defer errw.Flush()
	stdout, stderr = outw, errw
	global := flag.NewFlagSet("rayform", flag.ContinueOnError)
	global.SetOutput(stderr)
	chdir := global.String("chdir", "", "switch to `DIR` before running the command")
	noColor := global.Bool("no-color", false, "disable colour in output")
	logLevel := global.String("log-level", os.Getenv("RAYFORM_LOG"), "log `LEVEL` on stderr: trace, debug, info, warn, error, off")
	showVersion := global.Bool("version", false, "print the version and exit")
	global.Usage = func() { usage(stderr) }
	if err := global.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitError
	}
	if *showVersion {
		return runVersion(context.Background(), &cli{stdout: stdout}, nil)
	}
	rest := global.Args()
	if len(rest) == 0 {
		usage(stderr)
		return exitError
	}
	if *chdir != "" {
		if err := os.Chdir(*chdir); err != nil {
			fmt.Fprintf(stderr, "Error: -chdir: %v\n", err)
			return exitError
		}
	}
	level := hclog.Off
	if *logLevel != "" {
		level = hclog.LevelFromString(*logLevel)
		if level == hclog.NoLevel {
			fmt.Fprintf(stderr, "Error: invalid log level %q (want trace, debug, info, warn, error or off)\n", *logLevel)
			return exitError
		}
	}
	c := &cli{
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
		dir:    ".",
		log: hclog.New(&hclog.LoggerOptions{
			Name:   "rayform",
			Level:  level,
			Output: stderr,
		}),
	}
	c.setColor(!*noColor && os.Getenv("NO_COLOR") == "" && tty)
	name := rest[0]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		usage(stdout)
		return exitOK
	}
	for _, cmd := range commands() {
		if cmd.name == name {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := c.handleSignals(cancel)
			defer stop()
			return cmd.run(ctx, c, rest[1:])
		}
	}
	names := make([]string, 0, len(commands()))
	for _, cmd := range commands() {
		names = append(names, cmd.name)
	}
	sort.Strings(names)
	if s := config.Suggest(name, names); s != "" {
		fmt.Fprintf(stderr, "Error: unknown command %q. Did you mean %q?\n\n", name, s)
	} else {
		fmt.Fprintf(stderr, "Error: unknown command %q\n\n", name)
	}
	usage(stderr)
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: rayform [global options] <command> [args]\n\nCommands:\n")
	cmds := commands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.synopsis)
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

// newFlagSet returns a flag set for a subcommand whose -help prints its usage.
func newFlagSet(c *cli, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	// -no-color is global, but Terraform users put it after the command.
	fs.BoolFunc("no-color", "disable colour in output (also a global option, and NO_COLOR=1)", func(v string) error {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		if off {
			c.setColor(false)
		}
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "Usage: rayform %s\n\n", synopsis)
		fmt.Fprintln(c.stderr, "Options:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a subcommand's flags; it returns an exit code and false
// when the command should stop (help shown or a flag error).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK, false
		}
		return exitError, false
	}
	return exitOK, true
}

// parseInterspersed is parseFlags for commands that take a positional
// argument (logs ADDRESS, output NAME, show PLAN): flags may come before
// or after it, as people type them (rayform logs vllm_serve.qwen -f). The
// positional arguments are returned in order; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var pos []string
	for {
		if code, ok := parseFlags(fs, args); !ok {
			return nil, code, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, exitOK, true
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), exitOK, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// setColor turns colour on or off: rayform's renderers use it, and the
// escaping writers in front of stdout and stderr let its styles
// (termtext.Styles) pass only while it is on.
func (c *cli) setColor(on bool) {
	c.color = on
	styles := []string(nil)
	if on {
		styles = termtext.Styles
	}
	for _, w := range []io.Writer{c.stdout, c.stderr} {
		if tw, ok := w.(*termtext.Writer); ok {
			tw.Allow(styles...)
		}
	}
}

// unescaped is the writer w escapes for when w is one of the CLI's
// escaping writers (termtext.Writer), else w.
func unescaped(w io.Writer) io.Writer {
	if tw, ok := w.(*termtext.Writer); ok {
		tw.Flush()
		return tw.Unwrap()
	}
	return w
}

// isTerminal reports whether w (or the writer a termtext.Writer escapes
// for) is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := unescaped(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func runVersion(_ context.Context, c *cli, args []string) int {
	if c.stderr != nil {
		fs := newFlagSet(c, "version", "version\n\n  Print the rayform version.")
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
	}
	fmt.Fprintf(c.stdout, "rayform v%s\n", version)
	return exitOK
}
