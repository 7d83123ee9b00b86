package views

import (
	"bytes"
	"sync"
	"testing"
)

// TestLogsStripTerminalControls feeds a serve log with the sequences a
// hostile or careless process can write (issue 22, item 9) through the
// writer rayform logs prints with: the text and the line breaks stay, the
// sequences go.
func TestLogsStripTerminalControls(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text and tabs", "INFO 12-01 10:00:00 [api_server.py:1] ready\tok\n", "n1 | INFO 12-01 10:00:00 [api_server.py:1] ready\tok\n"},
		{"colours", "\x1b[32mINFO\x1b[0m started\n", "n1 | INFO started\n"},
		{"window title (OSC 0, BEL)", "a\x1b]0;pwned title\x07b\n", "n1 | ab\n"},
		{"clipboard write (OSC 52, ST)", "a\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x1b\\b\n", "n1 | ab\n"},
		{"clear screen and cursor home", "\x1b[2J\x1b[Hafter\n", "n1 | after\n"},
		{"private mode (alternate screen)", "x\x1b[?1049hy\n", "n1 | xy\n"},
		{"8-bit CSI", "a\u009b2Jb\n", "n1 | ab\n"},
		{"8-bit OSC to ST", "a\u009d0;t\u009cb\n", "n1 | ab\n"},
		{"8-bit CSI as a raw byte (issue 30)", "a\x9b2Jb\n", "n1 | ab\n"},
		{"8-bit OSC as raw bytes", "a\x9d52;c;ZXZpbA==\x9cb\n", "n1 | ab\n"},
		{"bidi override", "a\u202eb\n", "n1 | ab\n"},
		{"DCS string", "a\x1bPq#0;2;0;0;0\x1b\\b\n", "n1 | ab\n"},
		{"charset escape", "a\x1b(Bb\n", "n1 | ab\n"},
		{"reset (ESC c) and bell", "\x1bca\x07b\n", "n1 | ab\n"},
		{"backspaces and DEL", "ab\b\b\x7fcd\n", "n1 | abcd\n"},
		{"unterminated OSC ends with the line", "a\x1b]0;title\nb\n", "n1 | a\nn1 | b\n"},
		{"carriage returns split progress redraws", "10%\r50%\r100%\r\ndone\n", "n1 | 10%\nn1 | 50%\nn1 | 100%\nn1 | done\n"},
		{"UTF-8 kept", "Größe 東京 ✓\n", "n1 | Größe 東京 ✓\n"},
		{"last line without newline", "tail\x1b[K", "n1 | tail\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := &prefixWriter{mu: &sync.Mutex{}, w: &out, prefix: "n1 | "}
			// Byte by byte: a sequence split across reads is still removed.
			for i := 0; i < len(tt.in); i++ {
				w.Write([]byte{tt.in[i]})
			}
			w.flush()
			if out.String() != tt.want {
				t.Errorf("got %q, want %q", out.String(), tt.want)
			}
		})
	}
}
