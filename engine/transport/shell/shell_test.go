package shell

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestQuoteGolden pins the exact quoting: any change to it shows up here.
func TestQuoteGolden(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "''"},
		{"abc", "abc"},
		{"/usr/bin/docker", "/usr/bin/docker"},
		{"--gpus=all", "'--gpus=all'"},
		{"a=b", "'a=b'"},
		{"user@host:22", "user@host:22"},
		{"50%", "50%"},
		{"a,b+c_d-e.f", "a,b+c_d-e.f"},
		{"two words", "'two words'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"$HOME", "'$HOME'"},
		{"`id`", "'`id`'"},
		{"a\nb", "'a\nb'"},
		{"*", "'*'"},
		{"~", "'~'"},
		{"#", "'#'"},
		{"é", "'é'"},
		{"\\", `'\'`},
	}
	for _, tt := range tests {
		if got := Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestJoin(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{nil, ""},
		{[]string{"echo"}, "echo"},
		{[]string{"docker", "run", "--name", "ray head"}, "docker run --name 'ray head'"},
		{[]string{"sh", "-c", "echo $1", "x"}, "sh -c 'echo $1' x"},
		{[]string{"printf", "", "x"}, "printf '' x"},
	}
	for _, tt := range tests {
		if got := Join(tt.argv); got != tt.want {
			t.Errorf("Join(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		argv []string
		want error
	}{
		{[]string{"a", "b c"}, nil},
		{nil, nil},
		{[]string{"a", "b\x00c"}, ErrNUL},
	}
	for _, tt := range tests {
		if got := Valid(tt.argv); !errors.Is(got, tt.want) {
			t.Errorf("Valid(%q) = %v, want %v", tt.argv, got, tt.want)
		}
	}
}

// roundTrip hands Join(argv) to a real `sh -c` after a printf that writes every
// argument NUL-terminated, and returns what the shell passed on.
func roundTrip(t testing.TB, argv []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	line := `printf '%s\0' ` + Join(argv)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v: %s", line, err, stderr.String())
	}
	if len(out) == 0 || out[len(out)-1] != 0 {
		t.Fatalf("sh -c %q: output %q is not NUL-terminated", line, out)
	}
	return strings.Split(string(out[:len(out)-1]), "\x00")
}

func TestQuoteRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	argvs := [][]string{
		{"plain"},
		{"", "x", ""},
		{"it's", `"double"`, `back\slash`, "$(id)", "`id`", "${HOME}"},
		{"line1\nline2", "\ttab", " lead", "trail "},
		{"*", "?", "[a]", "~", "~root", "#comment", "a=b", "!"},
		{"\xff\xfe invalid utf8", "日本語", "\r\n"},
		{"'", "''", "'''"},
	}
	for _, argv := range argvs {
		got := roundTrip(t, argv)
		if strings.Join(got, "\x00") != strings.Join(argv, "\x00") || len(got) != len(argv) {
			t.Errorf("round trip of %q gave %q", argv, got)
		}
	}
}

// FuzzQuoteRoundTrip proves that any argv (without NUL, which argv cannot
// carry) survives Join and a real `sh -c` unchanged. The first input is split
// on 0x1e into several words so the fuzzer explores multi-word command lines.
func FuzzQuoteRoundTrip(f *testing.F) {
	if _, err := exec.LookPath("/bin/sh"); err != nil {
		f.Skip("no /bin/sh")
	}
	f.Add("a\x1eb c", "d")
	f.Add("it's", "$HOME")
	f.Add("\n\x1e'\x1e\\", "`id`")
	f.Add("", "")
	f.Add("~\x1e*\x1ea=b", "\xff")
	f.Fuzz(func(t *testing.T, a, b string) {
		argv := append(strings.Split(a, "\x1e"), b)
		if Valid(argv) != nil {
			t.Skip("NUL cannot be passed in argv")
		}
		got := roundTrip(t, argv)
		if len(got) != len(argv) {
			t.Fatalf("round trip of %q gave %d words %q", argv, len(got), got)
		}
		for i := range argv {
			if got[i] != argv[i] {
				t.Fatalf("word %d: sent %q, shell passed %q (line %q)", i, argv[i], got[i], Join(argv))
			}
		}
	})
}

func BenchmarkJoin(b *testing.B) {
	argv := []string{"docker", "run", "-d", "--name", "ray-head", "--label", "rayform.spec=abc'def", "--gpus=all", "image:tag"}
	for b.Loop() {
		_ = Join(argv)
	}
}
