// Package vllm plays `vllm serve`: vLLM's argument parsing, its startup log,
// the engine's workers (in-process for the uni and mp backends, Ray actors
// on every node for the ray backend: placement group anchored on
// node:<driver ip>, c10d rendezvous on the driver's address, NCCL/Gloo
// interface checks, weight loading, KV cache sizing, CUDA graph capture
// under Ray's memory monitor), and, once loaded, the OpenAI server.
package vllm

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rayform/rayform/cmd/simnode/internal/argparse"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/resources/clitables"
	"github.com/rayform/rayform/resources/vllmcli"
)

// Version is the vLLM version the simulator reports: the one whose command
// line vllmcli describes.
const Version = vllmcli.Version

// The parsers' names and usage lines, from the generated table of the
// image's vLLM (resources/clitables).
var (
	table       = clitables.MustVLLM(Version)
	topUsage    = table.Parser.TopUsage
	serveUsage  = table.Parser.Usage
	subcommands = table.Parser.Subcommands
)

func serveParser() *argparse.Parser {
	return &argparse.Parser{Prog: table.Parser.Prog, Usage: serveUsage, TopProg: table.Parser.TopProg, TopUsage: topUsage, Options: vllmcli.ServeOptions(), Positional: "model_tag", ServeModelRewrite: true}
}

// Main runs `vllm ARGS...`.
func Main(ctx context.Context, p *sim.Proc) int {
	args := p.Args
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(p.Stdout, "usage: %s\n\nvLLM CLI\n\npositional arguments:\n  {chat,complete,serve,bench,collect-env,run-batch}\n    serve               Launch a local OpenAI-compatible API server to serve LLM\n                        completions via HTTP.\n\noptions:\n  -h, --help            show this help message and exit\n  -v, --version         show program's version number and exit\n", topUsage)
		return 0
	}
	if args[0] == "-v" || args[0] == "--version" {
		fmt.Fprintln(p.Stdout, Version)
		return 0
	}
	known := false
	for _, s := range subcommands {
		if s == args[0] {
			known = true
		}
	}
	if !known {
		q := make([]string, len(subcommands))
		for i, s := range subcommands {
			q[i] = "'" + s + "'"
		}
		fmt.Fprintf(p.Stderr, "usage: %s\nvllm: error: argument subparser: invalid choice: '%s' (choose from %s)\n", topUsage, args[0], strings.Join(q, ", "))
		return 2
	}
	if args[0] != "serve" {
		fmt.Fprintf(p.Stderr, "simnode: `vllm %s` is not simulated\n", args[0])
		return 1
	}
	if tb := preParseError(args); tb != "" {
		fmt.Fprint(p.Stderr, tb)
		return 1
	}
	parser := serveParser()
	res, perr := parser.Parse(args[1:])
	if perr != nil {
		fmt.Fprint(p.Stderr, perr.Format())
		return 2
	}
	if res.Help {
		fmt.Fprintf(p.Stdout, "usage: %s\n\nStart the vLLM OpenAI Compatible API server.\n", serveUsage)
		return 0
	}
	if tb := validateServe(res); tb != "" {
		fmt.Fprint(p.Stderr, tb)
		return 1
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			cancel(signalled{s})
		case <-ctx.Done():
		}
	}()
	return serve(ctx, p, parser, res)
}

// signalled is the cancellation cause of a serve stopped by a signal.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return "received " + s.sig.String() }
