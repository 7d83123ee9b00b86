package views

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Fmt shows fmt's work: the files it changed, the formatted source or its
// diff on stdout, and the syntax errors and other errors on stderr (human
// only).
type Fmt struct{ *View }

// NewFmt is fmt's view.
func NewFmt(v *View) *Fmt { return &Fmt{View: v} }

// Changed names a file whose formatting changed.
func (v *Fmt) Changed(path string) { fmt.Fprintln(v.stdout, path) }

// Source writes formatted source, or a diff, to stdout.
func (v *Fmt) Source(b []byte) error {
	_, err := v.stdout.Write(b)
	return err
}

// Errorf prints an error.
func (v *Fmt) Errorf(format string, args ...any) {
	fmt.Fprintf(v.stderr, "Error: "+format+"\n", args...)
}

// SyntaxErrors prints each diagnostic of src as
//
//	Error: <summary>
//
//	  on <file>:<line>:<col>:
//	    <line> | <source line>
//	           |   ^
//
//	<detail>
func (v *Fmt) SyntaxErrors(diags hcl.Diagnostics, src []byte) {
	w := v.stderr
	lines := strings.Split(string(src), "\n")
	for _, d := range diags {
		sev := "Error"
		if d.Severity == hcl.DiagWarning {
			sev = "Warning"
		}
		fmt.Fprintf(w, "%s: %s\n", sev, d.Summary)
		if s := d.Subject; s != nil {
			fmt.Fprintf(w, "\n  on %s:%d:%d:\n", s.Filename, s.Start.Line, s.Start.Column)
			if n := s.Start.Line; n >= 1 && n <= len(lines) {
				num := fmt.Sprint(n)
				text := strings.TrimRight(lines[n-1], "\r")
				fmt.Fprintf(w, "    %s | %s\n", num, text)
				fmt.Fprintf(w, "    %s | %s^\n", strings.Repeat(" ", len(num)), caretPad(text, s.Start.Column))
			}
		}
		if d.Detail != "" {
			fmt.Fprintf(w, "\n%s\n", d.Detail)
		}
		fmt.Fprintln(w)
	}
}

// caretPad returns the padding that puts a caret under column col (a
// 1-based character column) of line, keeping tabs so the caret lines up.
func caretPad(line string, col int) string {
	var b strings.Builder
	i := 1
	for _, ch := range line {
		if i >= col {
			break
		}
		if ch == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		i++
	}
	return b.String()
}
