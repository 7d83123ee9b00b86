package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/rayform/rayform/resources/diagnose"
)

// exitCause is diagnose's exit code when a known failure was found: the
// command ran fine, and what it read shows a cause (as plan
// -detailed-exitcode's 2 means "succeeded, and something to act on").
// 0 is a log with no known failure, 1 an input that could not be read.
const exitCause = 2

// runDiagnose classifies logs given as files or on stdin, with no
// configuration: a hand-run deployment's logs as well as rayform's.
func runDiagnose(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "diagnose", `diagnose [-json] [FILE|-]...

  Reads the logs (files; "-" or no argument: stdin), names the root cause of
  the failure they show with the evidence lines and the fix. The logs of
  several hosts of one failure go together. Needs no configuration.
  Secrets in the logs (tokens, Authorization headers, passwords) are masked.

  Exit codes: 0 no known failure found, 2 a cause found, 1 an input could not
  be read.`)
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	paths, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	if len(paths) == 0 {
		paths = []string{"-"}
	}
	logs := make([]diagnose.Log, 0, len(paths))
	stdinRead := false
	for _, p := range paths {
		// Each input is read as a stream into a bounded window
		// (diagnose.ReadLog): a log of any size, or an endless stdin, is
		// classified in bounded memory.
		var (
			l   diagnose.Log
			err error
		)
		if p == "-" {
			if stdinRead {
				fmt.Fprintln(c.stderr, `Error: "-" (stdin) given more than once`)
				return exitError
			}
			stdinRead = true
			l, err = diagnose.ReadLog(c.stdin, "", "stdin")
			if err != nil {
				err = fmt.Errorf("read stdin: %w", err)
			}
		} else {
			l, err = readLogFile(p)
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		logs = append(logs, l)
	}
	d := diagnose.Classify(diagnose.Input{Logs: logs})
	exit := exitOK
	if d.Failure {
		exit = exitCause
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(d.Report(paths)); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		return exit
	}
	fmt.Fprint(c.stdout, d.Text())
	return exit
}

// readLogFile reads the window of the log file at path.
func readLogFile(path string) (diagnose.Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return diagnose.Log{}, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	l, err := diagnose.ReadLog(f, "", path)
	if err != nil {
		return diagnose.Log{}, fmt.Errorf("read %s: %w", path, err)
	}
	return l, nil
}
