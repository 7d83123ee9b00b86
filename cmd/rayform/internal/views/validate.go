package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/termtext"
)

// Validate shows validate's result: the diagnostics and a verdict for a
// person (ValidateHuman), or Terraform's validate -json document
// (ValidateJSON).
type Validate interface {
	Show(files map[string]*hcl.File, diags hcl.Diagnostics) error
	Error(err error)
}

// NewValidate is the validate view vt chooses.
func NewValidate(vt arguments.ViewType, v *View) Validate {
	if vt == arguments.ViewJSON {
		return &ValidateJSON{View: v}
	}
	return &ValidateHuman{View: v}
}

// ValidateHuman writes the diagnostics to stderr and, when valid, the
// verdict to stdout.
type ValidateHuman struct{ *View }

// Show prints the diagnostics and the verdict.
func (v *ValidateHuman) Show(files map[string]*hcl.File, diags hcl.Diagnostics) error {
	v.Diagnostics(files, diags)
	if !diags.HasErrors() {
		msg := "Success! The configuration is valid."
		if len(diags) > 0 {
			msg = "Success! The configuration is valid, but there were some validation warnings as shown above."
		}
		if v.color {
			msg = termtext.Green + termtext.Bold + msg + termtext.Reset
		}
		fmt.Fprintln(v.stdout, msg)
	}
	return nil
}

// ValidateJSON prints the validate -json document.
type ValidateJSON struct{ *View }

// Show prints the document.
func (v *ValidateJSON) Show(files map[string]*hcl.File, diags hcl.Diagnostics) error {
	b, err := json.MarshalIndent(validateJSON(files, diags), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	fmt.Fprintf(v.stdout, "%s\n", b)
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
