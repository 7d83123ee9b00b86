package jsonfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type doc struct {
	A int    `json:"a"`
	B string `json:"b"`
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "f.json: file is empty"},
		{"blank", " \n\t", "f.json: file is empty"},
		{"syntax", "{\"a\":}", "f.json:1:6: invalid character '}'"},
		{"syntax line 3", "{\n  \"a\": 1,\n  }", "f.json:3:3: invalid character '}'"},
		{"type", "{\n  \"a\": \"x\"\n}", "f.json:2:10: json: cannot unmarshal string"},
		{"truncated", "{\n \"a\": 1", "f.json:2:8: unexpected end of JSON input (truncated file?)"},
		{"unknown field", "{\"a\":1,\"env\":{}}", "f.json: json: unknown field \"env\""},
		{"trailing", "{\"a\":1}\n\n x", "f.json:3:2: unexpected data after the top-level JSON value"},
		{"second value", "{\"a\":1}{}", "f.json:1:8: unexpected data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			err := Decode("f.json", []byte(tt.data), &d)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Decode(%q) = %v, want prefix %q", tt.data, err, tt.want)
			}
		})
	}
}

func TestDecodeOK(t *testing.T) {
	var d doc
	if err := Decode("f.json", []byte("{\"a\":3,\"b\":\"x\"}\n\n"), &d); err != nil {
		t.Fatal(err)
	}
	if d != (doc{3, "x"}) {
		t.Errorf("got %+v", d)
	}
}

func TestPosition(t *testing.T) {
	data := []byte("ab\ncd\n")
	tests := []struct {
		off       int64
		line, col int
	}{{0, 1, 1}, {1, 1, 2}, {2, 1, 3}, {3, 2, 1}, {4, 2, 2}, {6, 3, 1}, {99, 3, 1}, {-1, 1, 1}}
	for _, tt := range tests {
		if l, c := Position(data, tt.off); l != tt.line || c != tt.col {
			t.Errorf("Position(%d) = %d:%d, want %d:%d", tt.off, l, c, tt.line, tt.col)
		}
	}
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f.json")
	for _, content := range []string{"first\n", "second\n"} {
		if err := WriteAtomic(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Errorf("content = %q, want %q", got, content)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
		}
		if names := entries(t, filepath.Dir(path)); len(names) != 1 || names[0] != "f.json" {
			t.Errorf("directory holds %v, want only f.json", names)
		}
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("created directory mode = %v, want 0700", fi.Mode().Perm())
	}
}

func TestWriteAtomicFailureKeepsOldFile(t *testing.T) {
	halfThenFail := func(w io.Writer, b []byte) error {
		if _, err := w.Write(b[:len(b)/2]); err != nil {
			return err
		}
		return errors.New("disk full")
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T, path string) // makes the write fail
		write   func(io.Writer, []byte) error
		wantErr string
	}{
		{"write fails half way", func(*testing.T, string) {}, halfThenFail, "disk full"},
		{"read-only directory", func(t *testing.T, path string) {
			if os.Geteuid() == 0 {
				t.Skip("root ignores directory permissions")
			}
			dir := filepath.Dir(path)
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
		}, nil, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.json")
			if err := os.WriteFile(path, []byte("old content\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, path)
			write := tt.write
			if write == nil {
				write = func(w io.Writer, b []byte) error { _, err := w.Write(b); return err }
			}
			err := writeAtomic(path, []byte("new content that is longer\n"), 0o600, write)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("error = %v, want one naming %s and containing %q", err, path, tt.wantErr)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "old content\n" {
				t.Errorf("old file changed to %q", got)
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Errorf("directory holds %v, want only f.json (temporary file left behind)", names)
			}
		})
	}
}

func TestWriteAtomicOntoDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(path, []byte("x"), 0o600); err == nil {
		t.Fatal("rename over a non-empty directory succeeded")
	}
	if names := entries(t, dir); len(names) != 1 || names[0] != "f.json" {
		t.Errorf("directory holds %v, want only f.json", names)
	}
}

// TestReplaceNeedsTheDirectory: Replace (an upload's write, like ssh's)
// does not create a missing directory; WriteAtomic does, with mode 0700.
func TestReplaceNeedsTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	if err := Replace(filepath.Join(dir, "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("Replace created a missing directory")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s exists after a failed Replace: %v", dir, err)
	}
	if err := WriteAtomic(filepath.Join(dir, "f"), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, filepath.Join(dir, "f"): 0o640} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, want)
		}
	}
}
