package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/rayform/rayform/engine/planfile"
	"github.com/rayform/rayform/engine/run"
)

func runApply(ctx context.Context, c *cli, args []string) int {
	var opts runOptions
	fs := newFlagSet(c, "apply", "apply [options] [PLAN]\n\n  Observe the hosts, show the plan, ask for confirmation, and make the hosts\n  match the configuration, verifying every step. With PLAN (from plan -out),\n  apply exactly that plan, or refuse if the hosts changed since.")
	opts.register(fs)
	autoApprove := fs.Bool("auto-approve", false, "skip the interactive confirmation")
	fs.BoolVar(&opts.rotateToken, "rotate-token", false, "make each cluster's authentication token anew under its lock (the plan then replaces the clusters that demand the old one)")
	atomic := fs.Bool("atomic", true, "when a replaced vllm_serve fails to become healthy, put back the serve that ran before it and wait for it to answer (apply still fails); -atomic=false leaves the failed serve as it is")
	opts.registerLock(fs, "applying")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(c.stderr, "Error: apply takes at most one argument, a saved plan (got %q)\n", fs.Args())
		return exitError
	}
	planPath := fs.Arg(0)
	if !*autoApprove && planPath == "" {
		if why := noPromptReason(&opts); why != "" {
			fmt.Fprintf(c.stderr, "Error: Plan file or auto-approve required\n\nrayform cannot ask for interactive approval when %s. Use -auto-approve or apply a saved plan.\n", why)
			return exitError
		}
	}
	var saved *planfile.File
	if planPath != "" {
		f, err := planfile.Read(planPath)
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		saved = f
		if len(opts.targets) > 0 || len(opts.replace) > 0 || opts.rotateToken {
			fmt.Fprintln(c.stderr, "Error: -target, -replace and -rotate-token cannot be given with a saved plan: the plan already records its own")
			return exitError
		}
		opts.targets = append(opts.targets, f.Targets...)
		opts.replace = append(opts.replace, f.Replace...)
	}
	s, code := openSession(c, &opts)
	if s == nil {
		return code
	}
	defer s.close()
	s.run.Options.NotAtomic = !*atomic
	return s.apply(ctx, run.ApplyRequest{AutoApprove: *autoApprove || saved != nil, Saved: saved, Destroy: saved != nil && saved.Destroy})
}

// registerLock registers -lock and -lock-timeout (apply and destroy).
func (o *runOptions) registerLock(fs *flag.FlagSet, doing string) {
	fs.BoolFunc("lock", "hold each cluster's lock on its head host while "+doing+" (default true; -lock=false to skip)", func(v string) error {
		b, err := strconv.ParseBool(v)
		o.noLock = !b
		return err
	})
	fs.DurationVar(&o.lockTimeout, "lock-timeout", 0, "wait up to `DURATION` for a lock another rayform holds (default: fail at once)")
}

// apply runs the engine's apply (or destroy) and renders it.
func (s *session) apply(ctx context.Context, req run.ApplyRequest) int {
	req.OnInterrupt = s.c.setInterruptHandler
	if err := s.run.Apply(ctx, req, &applyView{s: s, destroy: req.Destroy}); err != nil {
		return exitError
	}
	return exitOK
}

// noPromptReason says why apply or destroy cannot ask for approval ("" when
// it can): -json owns stdout, -input=false forbids prompts.
func noPromptReason(opts *runOptions) string {
	switch {
	case opts.json:
		return "-json is set"
	case !opts.input:
		return "-input=false is set"
	}
	return ""
}
