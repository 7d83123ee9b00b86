package diagnose

import (
	"strconv"
	"strings"
)

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
