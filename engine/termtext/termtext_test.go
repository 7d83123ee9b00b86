package termtext

import (
	"bytes"
	"testing"
)

func TestPlain(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "INFO ready\tok", "INFO ready\tok"},
		{"SGR colours", "\x1b[32mINFO\x1b[0m x", "INFO x"},
		{"OSC title, BEL", "a\x1b]0;t\x07b", "ab"},
		{"OSC clipboard, ST", "a\x1b]52;c;ZXZpbA==\x1b\\b", "ab"},
		{"CSI clear and home", "\x1b[2J\x1b[Hx", "x"},
		{"CSI private mode", "x\x1b[?1049hy", "xy"},
		{"CSI with intermediate", "x\x1b[1 qy", "xy"},
		{"8-bit CSI", "a\u009b2Jb", "ab"},
		{"8-bit OSC to 8-bit ST", "a\u009d0;t\u009cb", "ab"},
		{"DCS", "a\x1bPq#0\x1b\\b", "ab"},
		{"APC", "a\x1b_x\x1b\\b", "ab"},
		{"charset", "a\x1b(Bb", "ab"},
		{"two-byte escape", "\x1bca\x1b7b", "ab"},
		{"C0 and DEL", "a\b\x07\x00\x7fb", "ab"},
		{"unterminated OSC", "a\x1b]0;rest", "a"},
		{"lone ESC at the end", "a\x1b", "a"},
		{"UTF-8 kept", "Größe 東京 ✓", "Größe 東京 ✓"},
		{"invalid UTF-8 kept", "a\xffb", "a\xffb"},
		{"raw 8-bit CSI byte (invalid UTF-8)", "a\x9b2Jb", "ab"},
		{"raw 8-bit OSC to raw ST", "a\x9d52;c;ZXZpbA==\x9cb", "ab"},
		{"raw C1 control byte", "a\x85\x88b", "ab"},
		{"raw C1 after a broken lead byte", "a\xe2\x9b2Jb", "a\xe2b"},
		{"bidi override and isolate", "a\u202eevil\u202c\u2066b\u2069", "aevilb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Plain([]byte(tt.in))); got != tt.want {
				t.Errorf("Plain(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestWriter: what the CLI prints passes through a Writer; every control
// that could act on the terminal arrives escaped, split across writes or
// not, and only rayform's own styles pass, only when allowed.
func TestWriter(t *testing.T) {
	tests := []struct {
		name, in, want string
		styles         bool
	}{
		{name: "plain", in: "Error: it failed\n\tdetail ✓ 東京\n", want: "Error: it failed\n\tdetail ✓ 東京\n"},
		{name: "OSC 52 clipboard write", in: "x\x1b]52;c;ZXZpbA==\x07y", want: `x\u001b]52;c;ZXZpbA==\u0007y`},
		{name: "OSC 0 title", in: "\x1b]0;pwned\x1b\\", want: `\u001b]0;pwned\u001b\`},
		{name: "CSI 2J", in: "\x1b[2J\x1b[H", want: `\u001b[2J\u001b[H`},
		{name: "8-bit CSI character", in: "a\u009b2Jb", want: `a\u009b2Jb`},
		{name: "raw 8-bit CSI byte", in: "a\x9b2Jb", want: `a\x9b2Jb`},
		{name: "raw C1 after a broken lead byte", in: "\xe2\x9b", want: "\xe2\\x9b"},
		{name: "other invalid UTF-8 kept", in: "a\xffb", want: "a\xffb"},
		{name: "carriage return, backspace, DEL, NUL", in: "ok\rfake\b\x7f\x00", want: `ok\u000dfake\u0008\u007f\u0000`},
		{name: "bidi override", in: "file\u202egnp.exe", want: `file\u202egnp.exe`},
		{name: "JSON stays JSON", in: "{\"m\":\"a\u009bb\u202e\"}\n", want: "{\"m\":\"a\\u009bb\\u202e\"}\n"},
		{name: "styles refused without colour", in: Bold + "x" + Reset, want: `\u001b[1mx\u001b[0m`},
		{name: "styles pass with colour", in: Red + "-" + Reset + Underline + "y" + Reset, want: Red + "-" + Reset + Underline + "y" + Reset, styles: true},
		{name: "other SGR refused with colour", in: "\x1b[8mhidden\x1b[0m", want: `\u001b[8mhidden` + Reset, styles: true},
		{name: "CSI refused with colour", in: "\x1b[2J", want: `\u001b[2J`, styles: true},
	}
	for _, tt := range tests {
		for _, split := range []bool{false, true} {
			var out bytes.Buffer
			w := NewWriter(&out)
			if tt.styles {
				w.Allow(Styles...)
			}
			if split { // byte by byte: a character or a style split across writes
				for i := 0; i < len(tt.in); i++ {
					if n, err := w.Write([]byte{tt.in[i]}); n != 1 || err != nil {
						t.Fatalf("%s: Write = %d, %v", tt.name, n, err)
					}
				}
			} else {
				w.Write([]byte(tt.in))
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("%s (split %v): got %q, want %q", tt.name, split, out.String(), tt.want)
			}
		}
	}
}

func TestControl(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	w.Write([]byte("a\xe2"))
	if err := Control(w, "\x1b[H\x1b[2J"); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "a\xe2\x1b[H\x1b[2J"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
