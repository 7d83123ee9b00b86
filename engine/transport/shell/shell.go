// Package shell quotes words for the POSIX shell, so that an argv built in Go
// reaches the remote program byte for byte after `sh -c` has parsed it.
//
// The quoting is the conservative one used by Python's shlex.quote and by
// k0sproject/rig: words made only of characters that are never special stay
// bare, everything else is wrapped in single quotes, and an embedded single
// quote is closed, escaped and reopened:
//
//	it's  →  'it'\''s'
//
// Inside single quotes the shell interprets nothing, so newlines, `$`,
// backquotes, globs and non-UTF-8 bytes all survive. The one byte that cannot be passed is NUL: argv entries
// are C strings, so callers must reject it (see Valid).
package shell

import (
	"errors"
	"strings"
)

// ErrNUL is returned by Valid for a word containing a NUL byte, which no
// program can receive in its argv.
var ErrNUL = errors.New("shell: argument contains a NUL byte")

// Quote returns s quoted for a POSIX shell so that the shell reads it back as
// exactly one word equal to s. The empty string becomes a pair of single
// quotes.
//
// '=' is deliberately not a safe character: a bare `a=b` in command position
// is an assignment, not a command name.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b.WriteString(`'\''`)
			continue
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('\'')
	return b.String()
}

// Join quotes each word of argv with Quote and joins them with single spaces,
// producing a command line that `sh -c` runs as argv[0] with arguments
// argv[1:].
func Join(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Quote(a))
	}
	return b.String()
}

// Valid reports whether every word of argv can be passed to a program; it
// returns ErrNUL for a word containing a NUL byte.
func Valid(argv []string) error {
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return ErrNUL
		}
	}
	return nil
}

// isSafe reports whether s needs no quoting: every byte is a letter, digit or
// one of @%+:,./_- (never special to sh in any position).
func isSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '@' || c == '%' || c == '+' || c == ':' || c == ',' || c == '.' || c == '/' || c == '_' || c == '-':
		default:
			return false
		}
	}
	return true
}
