package main

import (
	"context"
	"fmt"

	"github.com/rayform/rayform/engine/run"
)

func runDestroy(ctx context.Context, c *cli, args []string) int {
	var opts runOptions
	fs := newFlagSet(c, "destroy", "destroy [options]\n\n  Stop every vllm serve process and remove every container rayform created for\n  this configuration (and for resources removed from it), serves first. Containers\n  rayform did not create are never touched.")
	opts.register(fs)
	autoApprove := fs.Bool("auto-approve", false, "skip the interactive confirmation")
	opts.registerLock(fs, "destroying")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if len(opts.replace) > 0 {
		fmt.Fprintln(c.stderr, "Error: destroy does not take -replace")
		return exitError
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "Error: destroy takes no arguments (got %q)\n", fs.Args())
		return exitError
	}
	if why := noPromptReason(&opts); why != "" && !*autoApprove {
		fmt.Fprintf(c.stderr, "Error: -auto-approve required\n\nrayform cannot ask for interactive approval when %s.\n", why)
		return exitError
	}
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	return s.apply(ctx, run.ApplyRequest{AutoApprove: *autoApprove, Destroy: true})
}
