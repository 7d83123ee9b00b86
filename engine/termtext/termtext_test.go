package termtext

import "testing"

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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Plain([]byte(tt.in))); got != tt.want {
				t.Errorf("Plain(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
