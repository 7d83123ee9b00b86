// Command simnode plays the programs of a GPU node that cannot run here:
// ray, vllm, nvidia-smi, ibdev2netdev and nvidia-container-runtime-hook, and
// util-linux's flock, which the lab image's busybox lacks.
// See doc.go for the contract.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/rayform/rayform/cmd/simnode/internal/flock"
	"github.com/rayform/rayform/cmd/simnode/internal/hook"
	"github.com/rayform/rayform/cmd/simnode/internal/ibdev"
	"github.com/rayform/rayform/cmd/simnode/internal/nvsmi"
	"github.com/rayform/rayform/cmd/simnode/internal/raycli"
	"github.com/rayform/rayform/cmd/simnode/internal/raylet"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/cmd/simnode/internal/vllm"
)

type tool func(context.Context, *sim.Proc) int

// tools maps the names simnode answers to (as argv[0] or first argument).
func tools() map[string]tool {
	return map[string]tool{
		"ray":                           raycli.Main,
		"vllm":                          vllm.Main,
		"nvidia-smi":                    nvsmi.Main,
		"ibdev2netdev":                  ibdev.Main,
		"nvidia-container-runtime-hook": hook.Main,
		"flock":                         flock.Main,
		raycli.DaemonCommand:            raycli.DaemonMain,
		raylet.WorkerCommand:            vllm.WorkerMain,
	}
}

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stderr))
}

// run selects the tool by argv[0]'s base name (a symlink such as
// /usr/local/bin/ray -> simnode) or, for `simnode <tool> args...`, by the
// first argument.
func run(ctx context.Context, argv []string, stderr io.Writer) int {
	ts := tools()
	name := filepath.Base(argv[0])
	args := argv[1:]
	t, ok := ts[name]
	if !ok {
		if len(args) == 0 || ts[args[0]] == nil {
			names := make([]string, 0, len(ts))
			for n := range ts {
				if n[0] != '_' {
					names = append(names, n)
				}
			}
			sort.Strings(names)
			fmt.Fprintf(stderr, "usage: simnode TOOL [ARGS...]   (or invoke through a symlink named after the tool)\ntools: %v\n", names)
			return 2
		}
		t, args = ts[args[0]], args[1:]
	}
	return t(ctx, sim.FromOS(args))
}
