package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/term"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/termtext"
	"github.com/rayform/rayform/resources"
)

// varFlags collects -var and -var-file options in command-line order, the
// order that decides which value wins. Commands that load the configuration
// register it with register and pass options() to config.Load.
type varFlags struct {
	args []config.VarArg
}

// varFlag is one of the two flags feeding a shared varFlags.
type varFlag struct {
	into *varFlags
	file bool
}

func (f varFlag) String() string { return "" }

func (f varFlag) Set(v string) error {
	f.into.args = append(f.into.args, config.VarArg{File: f.file, Value: v})
	return nil
}

// register adds -var and -var-file to fs.
func (v *varFlags) register(fs *flag.FlagSet) {
	fs.Var(varFlag{into: v}, "var", "set a variable, `NAME=VALUE` (repeatable)")
	fs.Var(varFlag{into: v, file: true}, "var-file", "set variables from `FILE` (HCL, or JSON when it ends in .json; repeatable)")
}

// options returns the load options: the flags in order and the
// environment's RAYFORM_VAR_<name> values.
func (v *varFlags) options() config.Options {
	return config.Options{Args: v.args, Env: os.Environ()}
}

// loadConfig loads the configuration in the working directory.
func loadConfig(c *cli, vars *varFlags) (*config.Config, hcl.Diagnostics) {
	return loadConfigWith(c, vars.options())
}

// loadConfigChecking loads the configuration for checking only (validate,
// graph): a variable without a value is unknown, not an error, so CI can
// check a configuration without its secrets.
func loadConfigChecking(c *cli, vars *varFlags) (*config.Config, hcl.Diagnostics) {
	opts := vars.options()
	opts.UnknownVariables = true
	return loadConfigWith(c, opts)
}

func loadConfigWith(c *cli, opts config.Options) (*config.Config, hcl.Diagnostics) {
	if opts.Kinds == nil {
		opts.Kinds = resources.Kinds().Schemas()
	}
	cfg, diags := config.Load(c.dir, opts)
	c.log.Debug("loaded configuration", "dir", c.dir, "files", len(cfg.Files), "diagnostics", len(diags))
	return cfg, diags
}

// writeDiagnostics renders diagnostics with source snippets on w, in colour
// when the CLI allows it, wrapped to the terminal width (78 otherwise).
func writeDiagnostics(c *cli, w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) {
	if len(diags) == 0 {
		return
	}
	width := uint(78)
	if f, ok := unescaped(w).(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
			width = uint(cols - 1)
		}
	}
	reset := ""
	if c.color {
		reset = "\x1b[0m" // a line cut inside its highlight
	}
	lw := &lineCapWriter{w: w, reset: reset}
	wr := hcl.NewDiagnosticTextWriter(lw, files, width, c.color)
	if err := wr.WriteDiagnostics(diags); err != nil {
		c.log.Error("cannot write diagnostics", "error", err)
	}
	lw.end()
}

// snippetLineMax is the most of one source line a diagnostic shows: a
// longer line (a value pasted inline, perhaps a secret) is cut, with the
// number of bytes not shown.
const snippetLineMax = 256

// lineCapWriter passes text through, each line cut after snippetLineMax
// bytes: the diagnostics' snippets quote source lines whole.
type lineCapWriter struct {
	w     io.Writer
	reset string // written after a cut, to end a highlight it cut
	n     int    // bytes of the current line so far
}

func (l *lineCapWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		seg := rest
		if i >= 0 {
			seg = rest[:i]
		}
		if keep := max(0, min(len(seg), snippetLineMax-l.n)); keep > 0 {
			if _, err := l.w.Write(seg[:keep]); err != nil {
				return 0, err
			}
		}
		l.n += len(seg)
		if i < 0 {
			break
		}
		if err := l.end(); err != nil {
			return 0, err
		}
		if _, err := l.w.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
		rest = rest[i+1:]
	}
	return len(p), nil
}

// end closes the current line: the count of the bytes cut from it.
func (l *lineCapWriter) end() error {
	cut := l.n - snippetLineMax
	l.n = 0
	if cut <= 0 {
		return nil
	}
	_, err := fmt.Fprintf(l.w, "%s… (%d bytes not shown)", l.reset, cut)
	return err
}

func runValidate(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "validate", "validate [options]")
	asJSON := fs.Bool("json", false, "print the result as JSON (Terraform's validate -json shape)")
	var vars varFlags
	vars.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "Error: validate takes no arguments (got %q); use -chdir=DIR to validate another directory\n", strings.Join(fs.Args(), " "))
		return exitError
	}
	view := newValidateView(c, *asJSON)
	cfg, diags := loadConfigChecking(c, &vars)
	if err := view.Show(cfg.Files, diags); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	if diags.HasErrors() {
		return exitError
	}
	return exitOK
}

// validateView shows validate's result: the diagnostics and a verdict for
// a person (validateText), or Terraform's validate -json document
// (validateJSONView), chosen once per command.
type validateView interface {
	Show(files map[string]*hcl.File, diags hcl.Diagnostics) error
}

func newValidateView(c *cli, json bool) validateView {
	if json {
		return validateJSONView{c: c}
	}
	return validateText{c: c}
}

// validateText writes the diagnostics to stderr and, when valid, the
// verdict to stdout.
type validateText struct{ c *cli }

func (v validateText) Show(files map[string]*hcl.File, diags hcl.Diagnostics) error {
	c := v.c
	writeDiagnostics(c, c.stderr, files, diags)
	if !diags.HasErrors() {
		msg := "Success! The configuration is valid."
		if len(diags) > 0 {
			msg = "Success! The configuration is valid, but there were some validation warnings as shown above."
		}
		if c.color {
			msg = termtext.Green + termtext.Bold + msg + termtext.Reset
		}
		fmt.Fprintln(c.stdout, msg)
	}
	return nil
}

// validateJSONView prints the validate -json document.
type validateJSONView struct{ c *cli }

func (v validateJSONView) Show(files map[string]*hcl.File, diags hcl.Diagnostics) error {
	b, err := json.MarshalIndent(validateJSON(files, diags), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	fmt.Fprintf(v.c.stdout, "%s\n", b)
	return nil
}

// Terraform's `validate -json` document.
type jsonValidate struct {
	FormatVersion string           `json:"format_version"`
	Valid         bool             `json:"valid"`
	ErrorCount    int              `json:"error_count"`
	WarningCount  int              `json:"warning_count"`
	Diagnostics   []jsonDiagnostic `json:"diagnostics"`
}

type jsonDiagnostic struct {
	Severity string       `json:"severity"`
	Summary  string       `json:"summary"`
	Detail   string       `json:"detail"`
	Range    *jsonRange   `json:"range,omitempty"`
	Snippet  *jsonSnippet `json:"snippet,omitempty"`
}

type jsonRange struct {
	Filename string  `json:"filename"`
	Start    jsonPos `json:"start"`
	End      jsonPos `json:"end"`
}

type jsonPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

type jsonSnippet struct {
	Context              *string `json:"context"`
	Code                 string  `json:"code"`
	StartLine            int     `json:"start_line"`
	HighlightStartOffset int     `json:"highlight_start_offset"`
	HighlightEndOffset   int     `json:"highlight_end_offset"`
}

// validateJSON converts diagnostics to Terraform's validate -json shape.
func validateJSON(files map[string]*hcl.File, diags hcl.Diagnostics) jsonValidate {
	out := jsonValidate{FormatVersion: "1.0", Diagnostics: []jsonDiagnostic{}}
	for _, d := range diags {
		jd := jsonDiagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
			out.WarningCount++
		} else {
			out.ErrorCount++
		}
		if d.Subject != nil {
			r := *d.Subject
			jd.Range = &jsonRange{
				Filename: r.Filename,
				Start:    jsonPos{Line: r.Start.Line, Column: r.Start.Column, Byte: r.Start.Byte},
				End:      jsonPos{Line: r.End.Line, Column: r.End.Column, Byte: r.End.Byte},
			}
			jd.Snippet = snippetFor(files[r.Filename], r)
		}
		out.Diagnostics = append(out.Diagnostics, jd)
	}
	out.Valid = out.ErrorCount == 0
	return out
}

// snippetFor returns the source lines of r with the highlight's offsets
// into them, or nil when the source is not available.
func snippetFor(f *hcl.File, r hcl.Range) *jsonSnippet {
	if f == nil || len(f.Bytes) == 0 || r.Start.Byte > len(f.Bytes) || r.End.Byte > len(f.Bytes) {
		return nil
	}
	src := f.Bytes
	start := r.Start.Byte
	for start > 0 && src[start-1] != '\n' {
		start--
	}
	end := r.End.Byte
	if end < r.Start.Byte {
		end = r.Start.Byte
	}
	for end < len(src) && src[end] != '\n' {
		end++
	}
	// At most snippetLineMax bytes of each line, as the text shows them.
	var code strings.Builder
	lw := &lineCapWriter{w: &code}
	_, _ = lw.Write(bytes.TrimRight(src[start:end], "\r\n"))
	_ = lw.end()
	s := &jsonSnippet{
		Code:                 code.String(),
		StartLine:            r.Start.Line,
		HighlightStartOffset: min(r.Start.Byte-start, code.Len()),
		HighlightEndOffset:   min(max(r.End.Byte, r.Start.Byte)-start, code.Len()),
	}
	if cs, ok := f.Nav.(interface{ ContextString(int) string }); ok {
		if ctx := cs.ContextString(r.Start.Byte); ctx != "" {
			s.Context = &ctx
		}
	}
	return s
}
