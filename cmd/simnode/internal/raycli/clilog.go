package raycli

import (
	"fmt"
	"io"
	"strings"

	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// cliLogger is Ray's autoscaler cli_logger: "record" style when stdout is
// not a terminal (timestamp, level, scripts.py:line), "pretty" otherwise
// (bare text with indentation and blank lines).
type cliLogger struct {
	p      *sim.Proc
	out    io.Writer
	record bool
	indent int
}

func newCLILogger(p *sim.Proc, style string) *cliLogger {
	record := style == "record" || (style != "pretty" && !sim.IsTerminal(p.Stdout))
	return &cliLogger{p: p, out: p.Stdout, record: record}
}

func (l *cliLogger) emit(w io.Writer, level, fileLine, msg string) {
	if l.record {
		fmt.Fprintln(w, pylog.RayRecord(l.p.Now(), level, fileLine, msg))
		return
	}
	fmt.Fprintln(w, strings.Repeat("  ", l.indent)+msg)
}

// Print is cli_logger.print.
func (l *cliLogger) Print(fileLine, format string, args ...any) {
	l.emit(l.out, "INFO", fileLine, fmt.Sprintf(format, args...))
}

// Success is cli_logger.success (level SUCC in record style).
func (l *cliLogger) Success(fileLine, format string, args ...any) {
	l.emit(l.out, "SUCC", fileLine, fmt.Sprintf(format, args...))
}

// Warning is cli_logger.warning.
func (l *cliLogger) Warning(fileLine, format string, args ...any) {
	l.emit(l.out, "WARNING", fileLine, fmt.Sprintf(format, args...))
}

// Error is cli_logger.error (stderr).
func (l *cliLogger) Error(fileLine, format string, args ...any) {
	l.emit(l.p.Stderr, "ERROR", fileLine, fmt.Sprintf(format, args...))
}

// Newline is cli_logger.newline: a blank line in pretty style only.
func (l *cliLogger) Newline() {
	if !l.record {
		fmt.Fprintln(l.out)
	}
}

// Group prints a heading and indents what follows (pretty style).
func (l *cliLogger) Group(fileLine, heading string) func() {
	l.Print(fileLine, "%s", heading)
	l.indent++
	return func() { l.indent-- }
}
