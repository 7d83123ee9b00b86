package command

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/rayform/rayform/engine/textdiff"
)

// The -update flag rewrites golden files. It is registered only if another
// test file of this package has not already done so.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// fmtResult is the outcome of one realMain run.
type fmtResult struct {
	code           int
	stdout, stderr string
}

func runRayform(t *testing.T, stdin string, args ...string) fmtResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := realMain(args, strings.NewReader(stdin), &stdout, &stderr)
	return fmtResult{code, stdout.String(), stderr.String()}
}

// checkGolden compares got with the golden file, or rewrites it with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if updatingGolden() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFmtGolden formats every testdata/fmt/*.hcl in place and compares the
// result with its .golden file, the -diff output with its .diff file, and
// checks that formatting the result again changes nothing.
func TestFmtGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("..", "..", "..", "..", "testdata", "fmt", "*.hcl"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in testdata/fmt (err %v)", err)
	}
	for _, in := range inputs {
		base := strings.TrimSuffix(in, ".hcl")
		t.Run(filepath.Base(base), func(t *testing.T) {
			src := readFile(t, in)
			dir := t.TempDir()
			file := filepath.Join(dir, "main.hcl")
			writeFiles(t, dir, map[string]string{"main.hcl": src})

			r := runRayform(t, "", "fmt", dir)
			if r.code != ExitOK || r.stderr != "" {
				t.Fatalf("fmt: exit %d, stderr:\n%s", r.code, r.stderr)
			}
			got := readFile(t, file)
			checkGolden(t, base+".golden", []byte(got))
			wantList := ""
			if got != src {
				wantList = file + "\n"
			}
			if r.stdout != wantList {
				t.Errorf("listed %q, want %q", r.stdout, wantList)
			}

			// Idempotence: the formatted file passes -check and a second
			// fmt leaves it byte-for-byte alone.
			if r := runRayform(t, "", "fmt", "-check", dir); r.code != ExitOK || r.stdout != "" {
				t.Errorf("-check on formatted output: exit %d, stdout %q", r.code, r.stdout)
			}
			if r := runRayform(t, "", "fmt", dir); r.stdout != "" || readFile(t, file) != got {
				t.Errorf("second fmt changed the file (listed %q)", r.stdout)
			}

			d := runRayform(t, src, "fmt", "-diff", "-")
			if d.code != ExitOK {
				t.Fatalf("fmt -diff -: exit %d, stderr:\n%s", d.code, d.stderr)
			}
			checkGolden(t, base+".diff", []byte(d.stdout))
			if patched, err := textdiff.Apply(src, d.stdout); err != nil || patched != got {
				t.Errorf("applying the diff does not give the formatted file (%v)\ngot:\n%s\nwant:\n%s", err, patched, got)
			}
		})
	}
}

// TestFmtSyntaxErrors checks that a file with a syntax error yields a
// diagnostic with file:line:col and exit 1, and is never rewritten.
func TestFmtSyntaxErrors(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("..", "..", "..", "..", "testdata", "fmt", "invalid", "*.hcl"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in testdata/fmt/invalid (err %v)", err)
	}
	for _, in := range inputs {
		base := strings.TrimSuffix(in, ".hcl")
		t.Run(filepath.Base(base), func(t *testing.T) {
			src := readFile(t, in)
			r := runRayform(t, src, "fmt", "-")
			if r.code != ExitError || r.stdout != "" {
				t.Errorf("stdin: exit %d, stdout %q; want exit 1 and no output", r.code, r.stdout)
			}
			checkGolden(t, base+".stderr", []byte(r.stderr))

			_, diags := hclsyntax.ParseConfig([]byte(src), "x", hcl.InitialPos)
			if !diags.HasErrors() || diags[0].Subject == nil {
				t.Fatalf("fixture has no located syntax error")
			}
			start := diags[0].Subject.Start

			for _, args := range [][]string{{"fmt"}, {"fmt", "-check"}, {"fmt", "-diff"}} {
				dir := t.TempDir()
				file := filepath.Join(dir, "bad.hcl")
				writeFiles(t, dir, map[string]string{"bad.hcl": src})
				r := runRayform(t, "", append(args, file)...)
				if r.code != ExitError {
					t.Errorf("%v: exit %d, want 1", args, r.code)
				}
				if loc := fmt.Sprintf("%s:%d:%d", file, start.Line, start.Column); !strings.Contains(r.stderr, loc) {
					t.Errorf("%v: stderr lacks %s:\n%s", args, loc, r.stderr)
				}
				if readFile(t, file) != src {
					t.Errorf("%v: file with a syntax error was rewritten", args)
				}
				if r.stdout != "" {
					t.Errorf("%v: stdout %q, want none", args, r.stdout)
				}
			}
		})
	}
}

const (
	fmtUgly   = "node \"a\" {\nhost=\"x\"\n}\n"
	fmtPretty = "node \"a\" {\n  host = \"x\"\n}\n"
	fmtBroken = "node \"a\" {\n  host = \n}\n"
)

func TestFmtCommand(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string // relative to DIR
		args       []string          // "DIR" is replaced by the temp dir
		stdin      string
		wantCode   int
		wantStdout string            // "DIR" is replaced by the temp dir
		wantStderr string            // substring; "DIR" replaced
		wantFiles  map[string]string // content afterwards; others must be unchanged
	}{
		{
			name:     "check on formatted dir",
			files:    map[string]string{"a.hcl": fmtPretty, "b.hcl": fmtPretty},
			args:     []string{"-check", "DIR"},
			wantCode: ExitOK,
		},
		{
			name:       "check on unformatted file lists it and writes nothing",
			files:      map[string]string{"a.hcl": fmtPretty, "b.hcl": fmtUgly},
			args:       []string{"-check", "DIR"},
			wantCode:   ExitFmt,
			wantStdout: "DIR/b.hcl\n",
		},
		{
			name:     "check -list=false is silent",
			files:    map[string]string{"b.hcl": fmtUgly},
			args:     []string{"-check", "-list=false", "DIR"},
			wantCode: ExitFmt,
		},
		{
			name:       "check -diff prints the diff",
			files:      map[string]string{"b.hcl": fmtUgly},
			args:       []string{"-check", "-list=false", "-diff", "DIR"},
			wantCode:   ExitFmt,
			wantStdout: "--- old/DIR/b.hcl\n+++ new/DIR/b.hcl\n@@ -1,3 +1,3 @@\n node \"a\" {\n-host=\"x\"\n+  host = \"x\"\n }\n",
		},
		{
			name:       "write is the default and lists changed files in order",
			files:      map[string]string{"b.hcl": fmtUgly, "a.hcl": fmtUgly, "c.hcl": fmtPretty},
			args:       []string{"DIR"},
			wantCode:   ExitOK,
			wantStdout: "DIR/a.hcl\nDIR/b.hcl\n",
			wantFiles:  map[string]string{"a.hcl": fmtPretty, "b.hcl": fmtPretty},
		},
		{
			name:       "-write=false lists without writing",
			files:      map[string]string{"a.hcl": fmtUgly},
			args:       []string{"-write=false", "DIR"},
			wantCode:   ExitOK,
			wantStdout: "DIR/a.hcl\n",
		},
		{
			name:       "-list=false -write=false prints the result",
			files:      map[string]string{"a.hcl": fmtUgly},
			args:       []string{"-list=false", "-write=false", "DIR/a.hcl"},
			wantCode:   ExitOK,
			wantStdout: fmtPretty,
		},
		{
			name:       "explicit file",
			files:      map[string]string{"a.hcl": fmtUgly, "b.hcl": fmtUgly},
			args:       []string{"DIR/b.hcl"},
			wantCode:   ExitOK,
			wantStdout: "DIR/b.hcl\n",
			wantFiles:  map[string]string{"b.hcl": fmtPretty},
		},
		{
			name:     "not recursive by default",
			files:    map[string]string{"a.hcl": fmtPretty, "sub/x.hcl": fmtUgly},
			args:     []string{"-check", "DIR"},
			wantCode: ExitOK,
		},
		{
			name:       "-recursive descends but skips hidden dirs",
			files:      map[string]string{"z.hcl": fmtUgly, "sub/deeper/x.hcl": fmtUgly, ".git/x.hcl": fmtUgly},
			args:       []string{"-recursive", "DIR"},
			wantCode:   ExitOK,
			wantStdout: "DIR/z.hcl\nDIR/sub/deeper/x.hcl\n",
			wantFiles:  map[string]string{"z.hcl": fmtPretty, "sub/deeper/x.hcl": fmtPretty},
		},
		{
			name:     "json and other files are ignored",
			files:    map[string]string{"a.hcl.json": `{"node":{"a":{"host":"x"}}}`, "notes.txt": fmtUgly, "a.hcl": fmtPretty},
			args:     []string{"-check", "DIR"},
			wantCode: ExitOK,
		},
		{
			name:       "explicit non-hcl file is an error",
			files:      map[string]string{"a.txt": fmtUgly},
			args:       []string{"DIR/a.txt"},
			wantCode:   ExitError,
			wantStderr: "only .hcl files can be formatted: DIR/a.txt",
		},
		{
			name:       "missing path is an error",
			args:       []string{"DIR/nope.hcl"},
			wantCode:   ExitError,
			wantStderr: "DIR/nope.hcl: no such file or directory",
		},
		{
			name:       "syntax error wins over -check and the good file is still processed",
			files:      map[string]string{"a.hcl": fmtUgly, "bad.hcl": fmtBroken},
			args:       []string{"-check", "DIR"},
			wantCode:   ExitError,
			wantStdout: "DIR/a.hcl\n",
			wantStderr: "DIR/bad.hcl:2:10",
		},
		{
			name:       "syntax error does not stop other files being written",
			files:      map[string]string{"a.hcl": fmtUgly, "bad.hcl": fmtBroken},
			args:       []string{"DIR"},
			wantCode:   ExitError,
			wantStdout: "DIR/a.hcl\n",
			wantStderr: "Error: Invalid expression",
			wantFiles:  map[string]string{"a.hcl": fmtPretty},
		},
		{
			name:       "stdin to stdout",
			args:       []string{"-"},
			stdin:      fmtUgly,
			wantCode:   ExitOK,
			wantStdout: fmtPretty,
		},
		{
			name:     "stdin -check unformatted",
			args:     []string{"-check", "-"},
			stdin:    fmtUgly,
			wantCode: ExitFmt,
		},
		{
			name:     "stdin -check formatted",
			args:     []string{"-check", "-"},
			stdin:    fmtPretty,
			wantCode: ExitOK,
		},
		{
			name:       "stdin cannot be mixed with paths",
			files:      map[string]string{"a.hcl": fmtUgly},
			args:       []string{"-", "DIR"},
			wantCode:   ExitError,
			wantStderr: `"-" (stdin) cannot be combined with other paths`,
		},
		{
			name:       "unknown flag",
			args:       []string{"-nope"},
			wantCode:   ExitError,
			wantStderr: "flag provided but not defined: -nope",
		},
		{
			name:       "help",
			args:       []string{"-help"},
			wantCode:   ExitOK,
			wantStderr: "Usage: rayform fmt [options] [PATH...]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			expand := func(s string) string { return strings.ReplaceAll(s, "DIR", dir) }
			args := []string{"fmt"}
			for _, a := range tt.args {
				args = append(args, expand(a))
			}
			r := runRayform(t, tt.stdin, args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if want := expand(tt.wantStdout); r.stdout != want {
				t.Errorf("wrong stdout\ngot:\n%s\nwant:\n%s", r.stdout, want)
			}
			if tt.wantStderr == "" && r.stderr != "" && tt.wantCode != ExitError {
				t.Errorf("unexpected stderr:\n%s", r.stderr)
			}
			if want := expand(tt.wantStderr); !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
			for name, before := range tt.files {
				want := before
				if after, ok := tt.wantFiles[name]; ok {
					want = after
				}
				if got := readFile(t, filepath.Join(dir, name)); got != want {
					t.Errorf("%s afterwards:\n%s\nwant:\n%s", name, got, want)
				}
			}
		})
	}
}

func TestFmtDefaultsToCurrentDir(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.hcl": fmtUgly, "sub/b.hcl": fmtUgly})
	t.Chdir(dir)
	r := runRayform(t, "", "fmt")
	if r.code != ExitOK || r.stdout != "a.hcl\n" {
		t.Errorf("exit %d, stdout %q; want 0 and \"a.hcl\\n\"", r.code, r.stdout)
	}
	if readFile(t, "a.hcl") != fmtPretty || readFile(t, "sub/b.hcl") != fmtUgly {
		t.Error("fmt without PATH should format ./*.hcl only")
	}
}

func TestFmtWritePreservesModeAndSymlinks(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		link bool
	}{
		{"private file", 0o600, false},
		{"executable bit kept", 0o755, false},
		{"group readable", 0o640, false},
		{"symlink rewrites its target", 0o644, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			real := filepath.Join(dir, "real.hcl")
			if tt.link {
				real = filepath.Join(dir, "target", "real.hcl")
			}
			writeFiles(t, dir, map[string]string{strings.TrimPrefix(real, dir+"/"): fmtUgly})
			if err := os.Chmod(real, tt.mode); err != nil {
				t.Fatal(err)
			}
			path := real
			if tt.link {
				path = filepath.Join(dir, "link.hcl")
				if err := os.Symlink(real, path); err != nil {
					t.Fatal(err)
				}
			}
			if r := runRayform(t, "", "fmt", path); r.code != ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if got := readFile(t, real); got != fmtPretty {
				t.Errorf("content:\n%s", got)
			}
			info, err := os.Stat(real)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != tt.mode {
				t.Errorf("mode %v, want %v", info.Mode().Perm(), tt.mode)
			}
			if tt.link {
				if li, err := os.Lstat(path); err != nil || li.Mode()&os.ModeSymlink == 0 {
					t.Errorf("symlink replaced by a regular file (err %v)", err)
				}
			}
			// No temporary file is left behind.
			err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(p, ".tmp") {
					t.Errorf("leftover temp file %s", p)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFmtRepoConfigsIdempotent checks that formatting every parseable
// config under examples/ and testdata/config/ twice gives the same bytes as
// formatting it once. It reads those files and never writes them.
func TestFmtRepoConfigsIdempotent(t *testing.T) {
	var files []string
	for _, root := range []string{"examples", filepath.Join("testdata", "config")} {
		err := filepath.WalkDir(filepath.Join("..", "..", "..", "..", root), func(p string, d fs.DirEntry, err error) error {
			if os.IsNotExist(err) {
				return filepath.SkipDir
			}
			if err == nil && !d.IsDir() && fmtIsConfigFile(p) {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) == 0 {
		t.Skip("no configs under examples/ or testdata/config/ yet")
	}
	parsed := 0
	for _, p := range files {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, diags := hclsyntax.ParseConfig(src, p, hcl.InitialPos); diags.HasErrors() {
			continue // deliberately broken fixtures
		}
		parsed++
		once := hclwrite.Format(src)
		if twice := hclwrite.Format(once); !bytes.Equal(once, twice) {
			t.Errorf("%s: formatting is not idempotent:\n%s", p, textdiff.Unified("once", "twice", once, twice))
		}
	}
	if parsed == 0 {
		t.Errorf("none of %d configs parses", len(files))
	}
}
