package resources

import "github.com/rayform/rayform/resources/diagnose"

// LogText is one log the failure classifier reads (diagnose.Log).
type LogText = diagnose.Log

// Diagnosis is the failure classifier's answer (diagnose.Diagnosis).
type Diagnosis = diagnose.Diagnosis

// Diagnose classifies logs read with no configuration (rayform diagnose):
// a hand-run deployment's logs as well as rayform's. Known reports
// whether it found a known cause.
func Diagnose(logs []LogText) (d Diagnosis, known bool) {
	d = diagnose.Classify(diagnose.Input{Logs: logs})
	return d, d.Cause != diagnose.Unknown
}

// EvidenceOf is d's evidence as -json shows it (never null).
func EvidenceOf(d Diagnosis) []EvidenceJSON {
	out := []EvidenceJSON{}
	for _, e := range d.Evidence {
		out = append(out, EvidenceJSON{Host: e.Host, Source: e.Source, Line: e.Line, LineNo: e.LineNo})
	}
	return out
}
