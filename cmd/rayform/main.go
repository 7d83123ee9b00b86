// Command rayform brings up Ray clusters and vLLM servers across GPU hosts
// reached over SSH, declaratively: validate, plan, apply, destroy. The
// commands live in internal/command, their arguments in
// internal/arguments and their views in internal/views.
package main

import (
	"io"
	"os"

	"github.com/rayform/rayform/cmd/rayform/internal/command"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// realMain runs the command line with the built-in commands and the lab's.
func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return command.Main(args, stdin, stdout, stderr, command.Options{
		Version: version,
		Extra: []command.Command{
			{Name: "lab", Synopsis: "Manage the local test lab (Linux, root)", Run: runLabCommand},
		},
	})
}
