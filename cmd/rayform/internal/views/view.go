// Package views renders what rayform's commands show, as Terraform's
// internal/command/views does: one view per command, for a person or as
// JSON, chosen once from the command's arguments (arguments.ViewType).
// Every error, warning and diagnostic a command prints goes through its
// view; each view embeds View, which holds the streams and the colour.
package views

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/term"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/termtext"
)

// View is what every command's view writes to: stdout, stderr, and
// whether colour is on.
type View struct {
	stdout, stderr io.Writer
	color          bool
}

// NewView returns the view writing to stdout and stderr, colour off.
func NewView(stdout, stderr io.Writer) *View {
	return &View{stdout: stdout, stderr: stderr}
}

// Stdout is the stream of the command's results.
func (v *View) Stdout() io.Writer { return v.stdout }

// Stderr is the stream of errors, warnings and progress.
func (v *View) Stderr() io.Writer { return v.stderr }

// Color reports whether colour is on.
func (v *View) Color() bool { return v.color }

// SetColor turns colour on or off: the renderers use it, and the escaping
// writers in front of stdout and stderr (termtext.Writer) let its styles
// (termtext.Styles) pass only while it is on.
func (v *View) SetColor(on bool) {
	v.color = on
	styles := []string(nil)
	if on {
		styles = termtext.Styles
	}
	for _, w := range []io.Writer{v.stdout, v.stderr} {
		if tw, ok := w.(*termtext.Writer); ok {
			tw.Allow(styles...)
		}
	}
}

// Error prints err as "Error: ..." on stderr.
func (v *View) Error(err error) {
	fmt.Fprintf(v.stderr, "Error: %v\n", err)
}

// Warning prints err as "Warning: ..." on stderr.
func (v *View) Warning(err error) {
	fmt.Fprintf(v.stderr, "Warning: %v\n", err)
}

// ParseError prints why a command's arguments stopped it: the usage for
// -help, the flag package's error and the usage for a bad flag, else the
// error. It returns the exit status: 0 for -help, 1 otherwise.
func (v *View) ParseError(e *arguments.ParseError) int {
	switch {
	case e.Help:
		fmt.Fprint(v.stderr, e.Usage)
		return 0
	case e.Flag != nil:
		fmt.Fprintln(v.stderr, e.Flag)
		fmt.Fprint(v.stderr, e.Usage)
	default:
		v.Error(e.Err)
	}
	return 1
}

// Notes prints what the plan could not check, and why (see
// run.Result.Notes), one "Note:" line each.
func (v *View) Notes(notes []string) {
	for _, n := range notes {
		fmt.Fprintf(v.stderr, "Note: %s\n", n)
	}
}

// Diagnostics renders diagnostics with source snippets on stderr, in
// colour when on, wrapped to the terminal width (78 otherwise).
func (v *View) Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) {
	if len(diags) == 0 {
		return
	}
	w := v.stderr
	width := uint(78)
	if f, ok := Unescaped(w).(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
			width = uint(cols - 1)
		}
	}
	reset := ""
	if v.color {
		reset = "\x1b[0m" // a line cut inside its highlight
	}
	lw := &lineCapWriter{w: w, reset: reset}
	wr := hcl.NewDiagnosticTextWriter(lw, files, width, v.color)
	_ = wr.WriteDiagnostics(diags) // stderr is where an error would go
	_ = lw.end()
}

// Unescaped is the writer w escapes for when w is one of the CLI's
// escaping writers (termtext.Writer), else w.
func Unescaped(w io.Writer) io.Writer {
	if tw, ok := w.(*termtext.Writer); ok {
		tw.Flush()
		return tw.Unwrap()
	}
	return w
}

// IsTerminal reports whether w (or the writer a termtext.Writer escapes
// for) is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := Unescaped(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// snippetLineMax is the most of one source line a diagnostic shows: a
// longer line (a value pasted inline, perhaps a secret) is cut, with the
// number of bytes not shown.
const snippetLineMax = 256

// lineCapWriter passes text through, each line cut after snippetLineMax
// bytes: the diagnostics' snippets quote source lines whole.
type lineCapWriter struct {
	w     io.Writer
	reset string // written after a cut, to end a highlight it cut
	n     int    // bytes of the current line so far
}

func (l *lineCapWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		seg := rest
		if i >= 0 {
			seg = rest[:i]
		}
		if keep := max(0, min(len(seg), snippetLineMax-l.n)); keep > 0 {
			if _, err := l.w.Write(seg[:keep]); err != nil {
				return 0, err
			}
		}
		l.n += len(seg)
		if i < 0 {
			break
		}
		if err := l.end(); err != nil {
			return 0, err
		}
		if _, err := l.w.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
		rest = rest[i+1:]
	}
	return len(p), nil
}

// end closes the current line: the count of the bytes cut from it.
func (l *lineCapWriter) end() error {
	cut := l.n - snippetLineMax
	l.n = 0
	if cut <= 0 {
		return nil
	}
	_, err := fmt.Fprintf(l.w, "%s… (%d bytes not shown)", l.reset, cut)
	return err
}
