package resources

import (
	"io"

	"github.com/rayform/rayform/resources/diagnose"
)

// LogText is one log the failure classifier reads (diagnose.Log).
type LogText = diagnose.Log

// Diagnosis is the failure classifier's answer (diagnose.Diagnosis).
type Diagnosis = diagnose.Diagnosis

// DiagnosisReport is a diagnosis as `rayform diagnose -json` prints it
// (diagnose.Report): the same value its text renders.
type DiagnosisReport = diagnose.Report

// Diagnose classifies logs read with no configuration (rayform diagnose):
// a hand-run deployment's logs as well as rayform's. The diagnosis says
// itself whether it found a failure (Failure) and named its cause (Known).
func Diagnose(logs []LogText) Diagnosis {
	return diagnose.Classify(diagnose.Input{Logs: logs})
}

// ReadLog reads one log from r as a stream into the classifier's bounded
// window (diagnose.ReadLog): a log of any size in bounded memory.
func ReadLog(r io.Reader, source string) (LogText, error) {
	return diagnose.ReadLog(r, "", source)
}

// EvidenceOf is d's evidence as -json shows it (never null).
func EvidenceOf(d Diagnosis) []EvidenceJSON {
	out := []EvidenceJSON{}
	for _, e := range d.Evidence {
		out = append(out, EvidenceJSON{Host: e.Host, Source: e.Source, Line: e.Line, LineNo: e.LineNo})
	}
	return out
}
