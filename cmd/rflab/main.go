//go:build linux

// Command rflab manages rayform's test lab: simulated GPU hosts (network
// namespaces with a real sshd and dockerd, simnode playing the GPUs, Ray
// and vLLM, or the real Ray and vLLM) that rayform reaches over SSH, as
// it would a rack of DGX Sparks. Linux and root only.
//
//	rflab up -name demo          bring a lab up (idempotent)
//	rflab run -name demo plan    run ./bin/rayform in the lab's client namespace
//	rflab exec -name demo spark2 -- hostname
//	rflab down -name demo
//
// The lab itself is package lab (cmd/rflab/lab); rflab is its command
// line, kept out of the rayform binary. make build puts it in bin/ beside
// rayform and simnode, where `rflab run` and `rflab up` find them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
)

const usage = `Usage: rflab <subcommand> [options]

Manage rayform's test lab: simulated GPU hosts (network namespaces with real
sshd and dockerd) that rayform reaches over SSH. Linux and root only.

Subcommands:
  up        Bring the lab up (idempotent)
  down      Remove everything the lab made (idempotent)
  status    Show nodes, addresses and process health
  run       Run rayform against the lab: rflab run plan (or apply, status,
            logs vllm_serve.qwen, ...) runs the rayform beside rflab (or
            -rayform PATH) in the client namespace, with the lab's SSH home,
            in the lab's directory
  exec      Run a command in a node's namespace: rflab exec NODE -- CMD...
            (NODE "client" is the namespace rayform runs in)
  env       Print shell variables describing the lab (for scripts)
  reboot    Reboot a node: containers stop, sshd and dockerd restart
  poweroff  Power a node off: its processes die, its links go down
  poweron   Power a node back on
  cut       Take a node's fabric port down
  uncut     Bring a node's fabric port back up

Run "rflab <subcommand> -help" for its options.
`

// cli is one run of rflab: its standard streams.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func main() {
	// The first SIGINT or SIGTERM cancels the context (up and down stop);
	// exec and run pass every signal on to their command instead, which
	// decides how it ends.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches `rflab <subcommand>` and returns the exit code.
func run(ctx context.Context, c *cli, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stderr, usage)
		if len(args) == 0 {
			return exitError
		}
		return exitOK
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "up":
		return labUp(ctx, c, rest)
	case "down":
		return labDown(ctx, c, rest)
	case "status":
		return labStatus(ctx, c, rest)
	case "run":
		return labRun(ctx, c, rest)
	case "exec":
		return labExec(ctx, c, rest)
	case "env":
		return labEnv(ctx, c, rest)
	case "reboot", "poweroff", "poweron", "cut", "uncut":
		return labNodeOp(ctx, c, sub, rest)
	case lab.SuperviseCommand:
		// Internal: the lab's supervisor process (started by rflab up).
		if len(rest) != 1 {
			fmt.Fprintln(c.stderr, "Error: usage: rflab "+lab.SuperviseCommand+" DIR")
			return exitError
		}
		if err := lab.Supervise(ctx, rest[0]); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		return exitOK
	}
	fmt.Fprintf(c.stderr, "Error: unknown subcommand %q\n\n%s", sub, usage)
	return exitError
}

// newFlagSet returns a subcommand's flag set, printing errors and usage
// on c's stderr.
func newFlagSet(c *cli, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "Usage: rflab %s\n\n", synopsis)
		fmt.Fprintln(c.stderr, "Options:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a subcommand's flags; it returns an exit code and false
// when the command should stop (help shown or a flag error).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitError, false
	}
	return exitOK, true
}

// findBinary looks for the program name next to this executable, then on
// $PATH (make build puts rflab, rayform and simnode side by side in bin/).
// flagName is the flag that names it instead, for the error.
func findBinary(name, flagName string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found next to rflab or on $PATH: run `make build` (it builds bin/%s) or pass -%s PATH", name, name, flagName)
}
