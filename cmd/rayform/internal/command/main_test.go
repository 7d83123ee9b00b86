package command

import "io"

// testVersion is the version the tests' rayform says it is.
const testVersion = "0.1.0-dev"

// realMain runs rayform's command line as cmd/rayform's main does, without
// the lab.
func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Main(args, stdin, stdout, stderr, Options{Version: testVersion})
}
