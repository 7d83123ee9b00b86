package diagnose

import (
	"strconv"
	"strings"
)

// Report is the diagnosis as one JSON object (`rayform diagnose -json`):
// the same value Text renders, fields always present.
type Report struct {
	// Inputs are the inputs read, in order ("-" is stdin).
	Inputs []string `json:"inputs"`
	// Known is Diagnosis.Known: the root cause is named.
	Known bool `json:"known"`
	// Failure is Diagnosis.Failure: the logs show a failure.
	Failure     bool             `json:"failure"`
	Cause       string           `json:"cause"`
	Title       string           `json:"title"`
	Evidence    []EvidenceReport `json:"evidence"`
	Explanation string           `json:"explanation"`
	Fix         string           `json:"fix"`
	// Also are the other causes whose lines were present (consequences).
	Also []string `json:"also"`
}

// EvidenceReport is one evidence line in a Report.
type EvidenceReport struct {
	Host   string `json:"host"`
	Source string `json:"source"`
	Line   string `json:"line"`
	LineNo int    `json:"line_no"`
}

// Report returns the diagnosis of the logs read from inputs as a Report.
func (d Diagnosis) Report(inputs []string) Report {
	r := Report{Inputs: append([]string{}, inputs...), Known: d.Known, Failure: d.Failure, Cause: string(d.Cause), Title: d.Title,
		Evidence: []EvidenceReport{}, Explanation: d.Explanation, Fix: d.Fix, Also: []string{}}
	for _, e := range d.Evidence {
		r.Evidence = append(r.Evidence, EvidenceReport{Host: e.Host, Source: e.Source, Line: e.Line, LineNo: e.LineNo})
	}
	for _, a := range d.Also {
		r.Also = append(r.Also, string(a))
	}
	return r
}

// Text renders the diagnosis for a terminal:
//
//	Cause: <title>
//	  evidence (<host>, <log>, line N): <line>
//	  <explanation>
//	  also in the logs (consequences): <causes>
//	Fix: <fix>
//
// Several evidence lines from one log are grouped under one header.
func (d Diagnosis) Text() string {
	var b strings.Builder
	b.WriteString("Cause: ")
	b.WriteString(d.Title)
	b.WriteByte('\n')
	for k := 0; k < len(d.Evidence); {
		e := d.Evidence[k]
		n := k + 1
		for n < len(d.Evidence) && d.Evidence[n].Host == e.Host && d.Evidence[n].Source == e.Source {
			n++
		}
		where := strings.Join(nonEmpty(e.Host, e.Source), ", ")
		if n-k == 1 {
			b.WriteString("  evidence (" + where + ", line " + strconv.Itoa(e.LineNo) + "): " + e.Line + "\n")
		} else {
			b.WriteString("  evidence (" + where + "):\n")
			w := 0
			for _, x := range d.Evidence[k:n] {
				w = max(w, len(strconv.Itoa(x.LineNo)))
			}
			for _, x := range d.Evidence[k:n] {
				no := strconv.Itoa(x.LineNo)
				b.WriteString("    " + strings.Repeat(" ", w-len(no)) + no + ": " + x.Line + "\n")
			}
		}
		k = n
	}
	writeIndented(&b, "  ", d.Explanation)
	if len(d.Also) > 0 {
		also := make([]string, len(d.Also))
		for i, c := range d.Also {
			also[i] = string(c)
		}
		b.WriteString("  also in the logs (consequences): " + strings.Join(also, ", ") + "\n")
	}
	if d.Fix != "" {
		lines := strings.Split(d.Fix, "\n")
		b.WriteString("Fix: " + lines[0] + "\n")
		writeIndented(&b, "  ", strings.Join(lines[1:], "\n"))
	}
	return b.String()
}

// writeIndented writes each line of s with the prefix; nothing for "".
func writeIndented(b *strings.Builder, prefix, s string) {
	if s == "" {
		return
	}
	for _, l := range strings.Split(s, "\n") {
		b.WriteString(prefix + l + "\n")
	}
}

// nonEmpty returns the non-empty strings of ss.
func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
