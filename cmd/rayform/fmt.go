package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/rayform/rayform/engine/state/jsonfile"
	"github.com/rayform/rayform/engine/textdiff"
)

// fmtOptions are the flags of `rayform fmt`.
type fmtOptions struct {
	list      bool // print the name of each file whose formatting changed
	write     bool // rewrite changed files in place
	diff      bool // print a unified diff of each change
	check     bool // write nothing; exit 3 if any file needs formatting
	recursive bool // descend into subdirectories
}

// fmtRun tracks one fmt invocation: its options, its output and what it found.
type fmtRun struct {
	opts    fmtOptions
	out     io.Writer
	errOut  io.Writer
	changed bool // some input was not canonically formatted
	failed  bool // some input could not be read, parsed or written
}

// runFmt implements `rayform fmt`: rewrite *.hcl files to canonical format,
// like `terraform fmt`.
func runFmt(_ context.Context, c *cli, args []string) int {
	flags := newFlagSet(c, "fmt", "fmt [options] [PATH...]\n\n"+
		"  Rewrites *.hcl files to canonical format. PATH is a file or a directory\n"+
		"  (default: the current directory); \"-\" reads stdin and writes stdout.")
	var o fmtOptions
	flags.BoolVar(&o.list, "list", true, "list files whose formatting differs")
	flags.BoolVar(&o.write, "write", true, "write the result to the source file instead of stdout")
	flags.BoolVar(&o.diff, "diff", false, "display diffs of formatting changes")
	flags.BoolVar(&o.check, "check", false, "check whether input is formatted; write nothing, exit 3 if not")
	flags.BoolVar(&o.recursive, "recursive", false, "also process files in subdirectories")
	if code, ok := parseFlags(flags, args); !ok {
		return code
	}
	if o.check {
		o.write = false
	}
	r := &fmtRun{opts: o, out: c.stdout, errOut: c.stderr}

	paths := flags.Args()
	if len(paths) == 0 {
		paths = []string{c.dir}
	}
	if slices.Contains(paths, "-") {
		if len(paths) > 1 {
			fmt.Fprintln(c.stderr, `Error: "-" (stdin) cannot be combined with other paths`)
			return exitError
		}
		r.stdin(c.stdin)
	} else {
		for _, p := range paths {
			r.path(p)
		}
	}
	switch {
	case r.failed:
		return exitError
	case o.check && r.changed:
		return exitFmt
	}
	return exitOK
}

// stdin formats standard input. The result goes to stdout unless -check or
// -diff asked for a report instead.
func (r *fmtRun) stdin(in io.Reader) {
	src, err := io.ReadAll(in)
	if err != nil {
		r.errorf("reading stdin: %v", err)
		return
	}
	result, ok := r.format("<stdin>", src)
	if !ok {
		return
	}
	changed := !bytes.Equal(src, result)
	r.changed = r.changed || changed
	switch {
	case r.opts.diff:
		if changed {
			r.writeOut(textdiff.Unified("old/<stdin>", "new/<stdin>", src, result))
		}
	case !r.opts.check:
		r.writeOut(result)
	}
}

// path formats one file named on the command line, or the *.hcl files of
// one directory.
func (r *fmtRun) path(p string) {
	info, err := os.Stat(p)
	if err != nil {
		r.errorf("%v", err)
		return
	}
	if info.IsDir() {
		r.dir(p)
		return
	}
	if !fmtIsConfigFile(p) {
		r.errorf("only .hcl files can be formatted: %s", p)
		return
	}
	r.file(p)
}

// dir formats the *.hcl files in dir in lexical order, then (with
// -recursive) its subdirectories, skipping hidden ones such as .git.
func (r *fmtRun) dir(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		r.errorf("%v", err)
		return
	}
	var subdirs []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			if r.opts.recursive && !strings.HasPrefix(e.Name(), ".") {
				subdirs = append(subdirs, p)
			}
		case fmtIsConfigFile(e.Name()):
			r.file(p)
		}
	}
	for _, d := range subdirs {
		r.dir(d)
	}
}

// file formats one file according to the options.
func (r *fmtRun) file(path string) {
	src, err := os.ReadFile(path)
	if err != nil {
		r.errorf("%v", err)
		return
	}
	result, ok := r.format(path, src)
	if !ok {
		return
	}
	if !bytes.Equal(src, result) {
		r.changed = true
		if r.opts.list {
			fmt.Fprintln(r.out, path)
		}
		if r.opts.write {
			if err := fmtWriteAtomic(path, result); err != nil {
				r.errorf("%v", err)
				return
			}
		}
		if r.opts.diff {
			r.writeOut(textdiff.Unified("old/"+filepath.ToSlash(path), "new/"+filepath.ToSlash(path), src, result))
		}
	}
	if !r.opts.list && !r.opts.write && !r.opts.diff && !r.opts.check {
		r.writeOut(result)
	}
}

// format parses src to reject syntax errors, then returns its canonical
// form. On a syntax error it prints the diagnostics and returns false.
func (r *fmtRun) format(filename string, src []byte) ([]byte, bool) {
	_, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		fmtWriteDiags(r.errOut, diags, src)
		r.failed = true
		return nil, false
	}
	return hclwrite.Format(src), true
}

func (r *fmtRun) writeOut(b []byte) {
	if _, err := r.out.Write(b); err != nil {
		r.errorf("writing output: %v", err)
	}
}

func (r *fmtRun) errorf(format string, args ...any) {
	fmt.Fprintf(r.errOut, "Error: "+format+"\n", args...)
	r.failed = true
}

// fmtIsConfigFile reports whether name is a native-syntax config file.
// JSON configs (*.hcl.json) have no canonical layout to enforce.
func fmtIsConfigFile(name string) bool {
	return strings.HasSuffix(name, ".hcl")
}

// fmtWriteDiags prints each diagnostic as
//
//	Error: <summary>
//
//	  on <file>:<line>:<col>:
//	    <line> | <source line>
//	           |   ^
//
//	<detail>
func fmtWriteDiags(w io.Writer, diags hcl.Diagnostics, src []byte) {
	lines := strings.Split(string(src), "\n")
	for _, d := range diags {
		sev := "Error"
		if d.Severity == hcl.DiagWarning {
			sev = "Warning"
		}
		fmt.Fprintf(w, "%s: %s\n", sev, d.Summary)
		if s := d.Subject; s != nil {
			fmt.Fprintf(w, "\n  on %s:%d:%d:\n", s.Filename, s.Start.Line, s.Start.Column)
			if n := s.Start.Line; n >= 1 && n <= len(lines) {
				num := fmt.Sprint(n)
				text := strings.TrimRight(lines[n-1], "\r")
				fmt.Fprintf(w, "    %s | %s\n", num, text)
				fmt.Fprintf(w, "    %s | %s^\n", strings.Repeat(" ", len(num)), fmtCaretPad(text, s.Start.Column))
			}
		}
		if d.Detail != "" {
			fmt.Fprintf(w, "\n%s\n", d.Detail)
		}
		fmt.Fprintln(w)
	}
}

// fmtCaretPad returns the padding that puts a caret under column col (a
// 1-based character column) of line, keeping tabs so the caret lines up.
func fmtCaretPad(line string, col int) string {
	var b strings.Builder
	i := 1
	for _, ch := range line {
		if i >= col {
			break
		}
		if ch == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		i++
	}
	return b.String()
}

// fmtWriteAtomic replaces path's content with data so that readers see
// either the old or the new file, never a partial one (jsonfile.Replace),
// keeping the original's mode. A symlink is resolved so that its target is
// rewritten and the link itself is kept.
func fmtWriteAtomic(path string, data []byte) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", path, err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return jsonfile.Replace(real, data, info.Mode().Perm())
}
