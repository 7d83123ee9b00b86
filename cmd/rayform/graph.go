package main

import (
	"context"
	"fmt"
	"strings"
)

func runGraph(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "graph", "graph [options]")
	var vars varFlags
	vars.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "Error: graph takes no arguments (got %q); use -chdir=DIR to graph another directory\n", strings.Join(fs.Args(), " "))
		return exitError
	}
	cfg, diags := loadConfigChecking(c, &vars)
	writeDiagnostics(c, c.stderr, cfg.Files, diags)
	if diags.HasErrors() {
		return exitError
	}
	fmt.Fprint(c.stdout, cfg.Graph().DOT())
	return exitOK
}
