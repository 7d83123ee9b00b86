// Package termtext makes text that did not come from rayform itself —
// from hosts (logs, command output, remote errors), from the hub, from
// repository file names — safe to print on an operator's terminal: such
// text is data, and must not retitle, clear or write the clipboard of the
// terminal that shows it. It is the one home of that judgment: [Plain]
// removes control sequences from a log line (rayform logs, diagnose, a
// serve's progress), and [Writer], which the CLI puts in front of its
// stdout and stderr, escapes every control that is left in anything
// printed, whatever path it took.
//
// What is unsafe: ESC (and so every 7-bit escape sequence), the other C0
// controls but the tab and the line feed, DEL, the C1 controls U+0080 to
// U+009F as characters and as raw bytes 0x80 to 0x9F outside valid UTF-8
// (which a terminal not decoding UTF-8 takes as C1: 0x9B is CSI), and the
// bidirectional embedding, override and isolate controls (U+202A to
// U+202E, U+2066 to U+2069), which reorder what follows them on screen.
package termtext

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// The SGR sequences rayform's own renderers write (the plan, the apply
// view, validate) and hcl's diagnostic writer: the only control sequences
// a [Writer] lets through, and only when it is told to (colour on).
const (
	Reset     = "\x1b[0m"
	Bold      = "\x1b[1m"
	Red       = "\x1b[31m"
	Green     = "\x1b[32m"
	Yellow    = "\x1b[33m"
	Underline = "\x1b[1;4m" // hcl's highlight of a diagnostic's subject
)

// Styles lists the sequences above.
var Styles = []string{Reset, Bold, Red, Green, Yellow, Underline}

// unsafe reports whether r must not reach a terminal as itself. The line
// feed is safe: callers that need lines without it say so.
func unsafe(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// introducer returns the 7-bit form of the escape sequence that starts b
// (ESC x; a C1 control, as a UTF-8 character or as a raw byte outside
// valid UTF-8), and how many bytes introduce it; ok is false when b starts
// with none.
func introducer(b []byte) (intro byte, n int, ok bool) {
	switch {
	case len(b) == 0:
		return 0, 0, false
	case b[0] == 0x1b && len(b) > 1:
		return b[1], 2, true
	case b[0] == 0xc2 && len(b) > 1 && b[1] >= 0x80 && b[1] <= 0x9f:
		return b[1] - 0x40, 2, true
	case b[0] >= 0x80 && b[0] <= 0x9f:
		return b[0] - 0x40, 1, true // a byte no valid UTF-8 starts with
	}
	return 0, 0, false
}

// Plain returns line without terminal control sequences: ECMA-48's
// CSI (ESC [ … final byte, or the 8-bit CSI), OSC, DCS, SOS, PM and APC
// strings up to their terminator (BEL or ST, or the end of the line), other
// two-byte escapes, C1 controls, bidirectional controls, and every C0
// control but the tab (the line feed too: line is one line). What is left
// is the text as a person reads it; invalid UTF-8 is kept as it is, except
// the bytes 0x80 to 0x9F, which a terminal not decoding UTF-8 takes as C1
// controls and which go as such (with the sequence they introduce).
func Plain(line []byte) []byte {
	out := make([]byte, 0, len(line))
	for i := 0; i < len(line); {
		if line[i] == 0x1b && i+1 == len(line) {
			break // a lone ESC at the end
		}
		intro, n, ok := introducer(line[i:])
		if !ok {
			r, size := utf8.DecodeRune(line[i:])
			if (r != utf8.RuneError || size > 1) && (unsafe(r) || r == '\n') {
				i += size
				continue
			}
			out = append(out, line[i:i+size]...)
			i += size
			continue
		}
		i += n
		switch intro {
		case '[': // CSI: parameter and intermediate bytes, then a final byte
			for i < len(line) && (line[i] < 0x40 || line[i] > 0x7e) {
				i++
			}
			i++
		case ']', 'P', 'X', '^', '_': // strings ended by BEL or ST
			i = stringEnd(line, i)
		default:
			// A two-byte escape (ESC 7, ESC c, …): both bytes go. ESC
			// followed by an intermediate byte takes its final byte too.
			for intro >= 0x20 && intro <= 0x2f && i < len(line) {
				intro = line[i]
				i++
			}
		}
	}
	return out
}

// stringEnd returns the index after the terminator of a control string
// whose body starts at i: BEL, ESC \ or ST (U+009C, or the raw byte), or
// the end of b.
func stringEnd(b []byte, i int) int {
	for i < len(b) {
		switch {
		case b[i] == 0x07, b[i] == 0x9c:
			return i + 1
		case b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\',
			b[i] == 0xc2 && i+1 < len(b) && b[i+1] == 0x9c:
			return i + 2
		}
		i++
	}
	return i
}

// Writer escapes what is written through it for a terminal: every unsafe
// character becomes \uXXXX (the form Go and JSON both read, so a JSON
// line stays valid and means the same), every raw byte 0x80 to 0x9F
// outside valid UTF-8 becomes \xNN, and the rest passes unchanged. Only
// the exact sequences it is allowed ([Writer.Allow]) pass as they are.
// A write that ends inside a UTF-8 character or inside an allowed
// sequence keeps that tail for the next write; Flush writes it. It is safe
// for concurrent use.
type Writer struct {
	mu    sync.Mutex
	w     io.Writer
	allow []string
	held  []byte
}

// NewWriter returns a Writer escaping for w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Allow sets the sequences that pass unescaped (Styles when colour is on,
// none when off).
func (w *Writer) Allow(seqs ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.allow = seqs
}

// Unwrap returns the writer w escapes for (for a check of whether it is a
// terminal).
func (w *Writer) Unwrap() io.Writer { return w.w }

// Write escapes p onto the underlying writer. It reports len(p) written
// when the escaped text was.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := append(w.held, p...)
	w.held = nil
	out, rest := w.escape(b, false)
	w.held = append([]byte(nil), rest...)
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes, escaped, what an earlier write left incomplete.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	out, _ := w.escape(w.held, true)
	w.held = nil
	_, err := w.w.Write(out)
	return err
}

// Control writes seq, a control sequence of rayform's own (status -watch
// clearing the screen), to w as it is: unescaped when w is a Writer.
func Control(w io.Writer, seq string) error {
	if tw, ok := w.(*Writer); ok {
		if err := tw.Flush(); err != nil {
			return err
		}
		w = tw.w
	}
	_, err := io.WriteString(w, seq)
	return err
}

// Escape returns s as a Writer without allowed sequences writes it.
func Escape(s string) string {
	out, _ := (&Writer{}).escape([]byte(s), true)
	return string(out)
}

// escape returns b escaped, and, unless final, the incomplete tail it
// kept back.
func (w *Writer) escape(b []byte, final bool) (out, rest []byte) {
	out = make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if b[i] == 0x1b && len(w.allow) > 0 {
			if seq, ok := w.allowed(b[i:]); ok {
				out = append(out, seq...)
				i += len(seq)
				continue
			}
			if !final && w.prefixOfAllowed(b[i:]) {
				return out, b[i:]
			}
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			if !final && !utf8.FullRune(b[i:]) {
				return out, b[i:]
			}
			if c := b[i]; c >= 0x80 && c <= 0x9f {
				out = fmt.Appendf(out, `\x%02x`, c)
			} else {
				out = append(out, c)
			}
			i++
			continue
		case unsafe(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out, nil
}

func (w *Writer) allowed(b []byte) (string, bool) {
	for _, s := range w.allow {
		if bytes.HasPrefix(b, []byte(s)) {
			return s, true
		}
	}
	return "", false
}

func (w *Writer) prefixOfAllowed(b []byte) bool {
	for _, s := range w.allow {
		if len(b) < len(s) && bytes.HasPrefix([]byte(s), b) {
			return true
		}
	}
	return false
}
