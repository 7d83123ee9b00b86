package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/rayform/rayform/resources"
)

// exitCause is diagnose's exit code when a known failure was found: the
// command ran fine, and what it read shows a cause (as plan
// -detailed-exitcode's 2 means "succeeded, and something to act on").
// 0 is a log with no known failure, 1 an input that could not be read.
const exitCause = 2

// diagnoseJSON is `rayform diagnose -json`: one object, fields always
// present (empty arrays, not null).
type diagnoseJSON struct {
	// Inputs are the inputs read, in order ("-" is stdin).
	Inputs []string `json:"inputs"`
	// Known is false when no known failure pattern matched (cause "unknown").
	Known       bool                     `json:"known"`
	Cause       string                   `json:"cause"`
	Title       string                   `json:"title"`
	Evidence    []resources.EvidenceJSON `json:"evidence"`
	Explanation string                   `json:"explanation"`
	Fix         string                   `json:"fix"`
	// Also are the other causes whose lines were present (consequences).
	Also []string `json:"also"`
}

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
	logs := make([]resources.LogText, 0, len(paths))
	stdinRead := false
	for _, p := range paths {
		var (
			text []byte
			err  error
			src  = p
		)
		if p == "-" {
			if stdinRead {
				fmt.Fprintln(c.stderr, `Error: "-" (stdin) given more than once`)
				return exitError
			}
			stdinRead = true
			src = "stdin"
			text, err = io.ReadAll(c.stdin)
		} else {
			text, err = os.ReadFile(p)
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: read %s: %v\n", src, err)
			return exitError
		}
		logs = append(logs, resources.LogText{Source: src, Text: text})
	}
	d, known := resources.Diagnose(logs)
	exit := exitOK
	if known {
		exit = exitCause
	}
	if *asJSON {
		out := diagnoseJSON{Inputs: paths, Known: known, Cause: string(d.Cause), Title: d.Title,
			Evidence: resources.EvidenceOf(d), Explanation: d.Explanation, Fix: d.Fix, Also: []string{}}
		for _, a := range d.Also {
			out.Also = append(out.Also, string(a))
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		return exit
	}
	fmt.Fprint(c.stdout, d.Text())
	return exit
}
