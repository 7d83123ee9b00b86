package command

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

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/state/jsonfile"
	"github.com/rayform/rayform/engine/textdiff"
)

// fmtRun tracks one fmt invocation: its options, its view and what it
// found.
type fmtRun struct {
	opts    *arguments.Fmt
	view    *views.Fmt
	changed bool // some input was not canonically formatted
	failed  bool // some input could not be read, parsed or written
}

// runFmt implements `rayform fmt`: rewrite *.hcl files to canonical format,
// like `terraform fmt`.
func runFmt(_ context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseFmt, args)
	if !ok {
		return code
	}
	r := &fmtRun{opts: a, view: views.NewFmt(m.View)}
	paths := a.Paths
	if len(paths) == 0 {
		paths = []string{m.dir}
	}
	if slices.Contains(paths, "-") {
		r.stdin(m.Stdin)
	} else {
		for _, p := range paths {
			r.path(p)
		}
	}
	switch {
	case r.failed:
		return ExitError
	case a.Check && r.changed:
		return ExitFmt
	}
	return ExitOK
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
	case r.opts.Diff:
		if changed {
			r.writeOut(textdiff.Unified("old/<stdin>", "new/<stdin>", src, result))
		}
	case !r.opts.Check:
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
			if r.opts.Recursive && !strings.HasPrefix(e.Name(), ".") {
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
		if r.opts.List {
			r.view.Changed(path)
		}
		if r.opts.Write {
			if err := fmtWriteAtomic(path, result); err != nil {
				r.errorf("%v", err)
				return
			}
		}
		if r.opts.Diff {
			r.writeOut(textdiff.Unified("old/"+filepath.ToSlash(path), "new/"+filepath.ToSlash(path), src, result))
		}
	}
	if !r.opts.List && !r.opts.Write && !r.opts.Diff && !r.opts.Check {
		r.writeOut(result)
	}
}

// format parses src to reject syntax errors, then returns its canonical
// form. On a syntax error it prints the diagnostics and returns false.
func (r *fmtRun) format(filename string, src []byte) ([]byte, bool) {
	_, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		r.view.SyntaxErrors(diags, src)
		r.failed = true
		return nil, false
	}
	return hclwrite.Format(src), true
}

func (r *fmtRun) writeOut(b []byte) {
	if err := r.view.Source(b); err != nil {
		r.errorf("writing output: %v", err)
	}
}

func (r *fmtRun) errorf(format string, args ...any) {
	r.view.Errorf(format, args...)
	r.failed = true
}

// fmtIsConfigFile reports whether name is a native-syntax config file.
// JSON configs (*.hcl.json) have no canonical layout to enforce.
func fmtIsConfigFile(name string) bool {
	return strings.HasSuffix(name, ".hcl")
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
