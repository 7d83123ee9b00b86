package main

import (
	"fmt"
	"io"
)

// writeNotes prints what the plan could not check, and why (see
// run.Result.Notes), one "Note:" line each.
func writeNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
}
