// Command rayform brings up Ray clusters and vLLM servers across GPU hosts
// reached over SSH, declaratively: validate, plan, apply, destroy. The
// commands live in internal/command, their arguments in
// internal/arguments and their views in internal/views.
package main

import (
	"os"

	"github.com/rayform/rayform/cmd/rayform/internal/command"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(command.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, command.Options{Version: version}))
}
