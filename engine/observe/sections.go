package observe

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNotProbeOutput is returned by Parse for output that does not start
// with the probe's header line (the shell failed before the probe ran, or
// the output came from something else).
var ErrNotProbeOutput = errors.New("not rayform probe output")

// section is one framed section of probe output. Stdout and Stderr alias
// the parsed buffer.
type section struct {
	name   string
	attrs  []string // "key=value" words after the name
	stdout []byte
	stderr []byte
	rc     int
	// skipped is the reason the probe did not run the section.
	skipped string
	// complete is false when the output ended (or another section began)
	// before the section's end line.
	complete bool
}

// attr returns the value of key among the section's attributes.
func (s *section) attr(key string) string {
	for _, a := range s.attrs {
		if k, v, ok := strings.Cut(a, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// failure describes why a section produced no facts, or "" when it ran and
// exited 0.
func (s *section) failure() string {
	switch {
	case s.skipped != "":
		return "not probed: " + s.skipped
	case !s.complete:
		return "probe output ended inside this section (connection lost or probe killed)"
	case s.rc == 0:
		return ""
	case s.rc == 124:
		return "timed out"
	}
	if msg := lastLine(s.stderr); msg != "" {
		return strings.TrimPrefix(msg, "rayform: ")
	}
	if msg := lastLine(s.stdout); msg != "" {
		return msg
	}
	return "exited " + strconv.Itoa(s.rc)
}

// part returns the stdout of the section before the first "part" line
// (name "") or after the part line called name.
func (s *section) part(name string) []byte {
	pre := []byte(marker + " part ")
	out := s.stdout
	start, cur := 0, ""
	for i := 0; i <= len(out); {
		j := bytes.IndexByte(out[i:], '\n')
		end := len(out)
		if j >= 0 {
			end = i + j
		}
		line := out[i:end]
		if bytes.HasPrefix(line, pre) {
			if cur == name {
				return out[start:max(i-1, start)]
			}
			cur = string(line[len(pre):])
			start = min(end+1, len(out))
		}
		if j < 0 {
			break
		}
		i = end + 1
	}
	if cur == name {
		return out[start:]
	}
	return nil
}

// splitSections cuts probe output into its sections. It fails only when the
// output does not begin with the probe header (after any noise a login
// shell printed); everything after that is best effort.
func splitSections(out []byte) (secs []section, version int, done bool, err error) {
	version, i, err := probeHeader(out)
	if err != nil {
		return nil, version, false, err
	}
	sp := splitter{out: out}
	mk := []byte(marker + " ")
	for i < len(out) {
		line, next := lineAt(out, i)
		if bytes.HasPrefix(line, mk) && !bytes.HasPrefix(line[len(mk):], []byte("part ")) {
			verb, rest, _ := strings.Cut(string(line[len(mk):]), " ")
			sp.marker(verb, rest, i, next)
		}
		i = next
	}
	sp.closeCur(len(out)+1, false)
	return sp.secs, version, sp.done, nil
}

// lineAt returns the line of out that starts at i (without its newline)
// and where the next one starts.
func lineAt(out []byte, i int) (line []byte, next int) {
	end := len(out)
	if j := bytes.IndexByte(out[i:], '\n'); j >= 0 {
		end = i + j
	}
	return out[i:end], end + 1
}

// probeHeader finds the probe's header line in out (anything the login
// shell printed before it is skipped) and returns the probe version and
// where the sections start; output of another probe version is not probe
// output.
func probeHeader(out []byte) (version, start int, err error) {
	head := []byte(marker + " probe ")
	i := 0
	for {
		line, next := lineAt(out, i)
		if bytes.HasPrefix(line, head) {
			v, perr := strconv.Atoi(string(bytes.TrimSpace(line[len(head):])))
			if perr != nil {
				return 0, 0, fmt.Errorf("%w: bad header %q", ErrNotProbeOutput, line)
			}
			version, start = v, next
			break
		}
		if next > len(out) {
			return 0, 0, ErrNotProbeOutput
		}
		i = next
	}
	if version != probeVersion {
		return version, 0, fmt.Errorf("%w: probe version %d, want %d", ErrNotProbeOutput, version, probeVersion)
	}
	return version, start, nil
}

// Where a splitter is in the framing of the section it reads.
const (
	frameOutside = iota
	frameStdout
	frameStderr
)

// splitter reads the framing markers of a probe's output into sections:
// begin, then the section's stdout, stderr and end (or skip instead of
// them), and done after the last section. A section the output cuts short
// is closed incomplete.
type splitter struct {
	out       []byte
	secs      []section
	done      bool
	state     int
	cur       *section
	bodyStart int // where the current stdout or stderr starts in out
}

// marker handles one framing line, verb and rest, that starts at offset at;
// the line after it starts at next.
func (sp *splitter) marker(verb, rest string, at, next int) {
	switch verb {
	case "begin":
		sp.closeCur(at, false)
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		sp.cur = &section{name: fields[0], attrs: fields[1:]}
		sp.state = frameStdout
		sp.bodyStart = min(next, len(sp.out))
	case "skip":
		if sp.cur != nil && sp.state == frameStdout {
			sp.cur.skipped = rest
			if sp.cur.skipped == "" {
				sp.cur.skipped = "skipped"
			}
			sp.finish()
		}
	case "stderr":
		if sp.cur != nil && sp.state == frameStdout {
			sp.cur.stdout = sp.body(at)
			sp.state = frameStderr
			sp.bodyStart = min(next, len(sp.out))
		}
	case "end":
		if sp.cur != nil && sp.state == frameStderr {
			sp.cur.stderr = sp.body(at)
			rc, perr := strconv.Atoi(strings.TrimSpace(rest))
			if perr != nil {
				rc = -1
			}
			sp.cur.rc = rc
			sp.finish()
		}
	case "done":
		sp.closeCur(at, false)
		sp.done = true
	}
}

// body is the current stdout or stderr, up to the newline before at.
func (sp *splitter) body(at int) []byte {
	return sp.out[sp.bodyStart:max(at-1, sp.bodyStart)]
}

// finish adds the current section, complete.
func (sp *splitter) finish() {
	sp.cur.complete = true
	sp.secs = append(sp.secs, *sp.cur)
	sp.cur, sp.state = nil, frameOutside
}

// closeCur adds the current section, if any, with the body read up to at.
func (sp *splitter) closeCur(at int, complete bool) {
	if sp.cur == nil {
		return
	}
	switch sp.state {
	case frameStdout:
		sp.cur.stdout = sp.body(at)
	case frameStderr:
		sp.cur.stderr = sp.body(at)
	}
	sp.cur.complete = complete
	sp.secs = append(sp.secs, *sp.cur)
	sp.cur = nil
	sp.state = frameOutside
}

// lastLine returns the last non-blank line of b, trimmed.
func lastLine(b []byte) string {
	b = bytes.TrimRight(b, " \t\r\n")
	if k := bytes.LastIndexByte(b, '\n'); k >= 0 {
		b = b[k+1:]
	}
	return string(bytes.TrimSpace(b))
}

// hasPart reports whether the section's stdout has a "part NAME" line.
func (s *section) hasPart(name string) bool {
	line := []byte(marker + " part " + name)
	for rest := s.stdout; len(rest) > 0; {
		k := bytes.IndexByte(rest, '\n')
		cur := rest
		if k >= 0 {
			cur, rest = rest[:k], rest[k+1:]
		} else {
			rest = nil
		}
		if bytes.Equal(bytes.TrimRight(cur, "\r"), line) {
			return true
		}
	}
	return false
}
