package views

import (
	"encoding/json"
	"fmt"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/resources/diagnose"
)

// Diagnose shows what diagnose found in the logs: the cause, its evidence
// and the fix for a person (DiagnoseHuman), or one JSON object
// (DiagnoseJSON).
type Diagnose interface {
	// Show shows the diagnosis of the logs read from paths.
	Show(d diagnose.Diagnosis, paths []string) error
	Error(err error)
}

// NewDiagnose is the diagnose view vt chooses.
func NewDiagnose(vt arguments.ViewType, v *View) Diagnose {
	if vt == arguments.ViewJSON {
		return &DiagnoseJSON{View: v}
	}
	return &DiagnoseHuman{View: v}
}

// DiagnoseHuman prints the diagnosis as text.
type DiagnoseHuman struct{ *View }

// Show prints the diagnosis.
func (v *DiagnoseHuman) Show(d diagnose.Diagnosis, _ []string) error {
	fmt.Fprint(v.stdout, d.Text())
	return nil
}

// DiagnoseJSON prints the diagnosis as one indented JSON object.
type DiagnoseJSON struct{ *View }

// Show prints the report of the diagnosis.
func (v *DiagnoseJSON) Show(d diagnose.Diagnosis, paths []string) error {
	enc := json.NewEncoder(v.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(d.Report(paths))
}
