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
	head := []byte(marker + " probe ")
	i := 0
	for {
		j := bytes.IndexByte(out[i:], '\n')
		end := len(out)
		if j >= 0 {
			end = i + j
		}
		line := out[i:end]
		if bytes.HasPrefix(line, head) {
			v, perr := strconv.Atoi(string(bytes.TrimSpace(line[len(head):])))
			if perr != nil {
				return nil, 0, false, fmt.Errorf("%w: bad header %q", ErrNotProbeOutput, line)
			}
			version = v
			i = end + 1
			break
		}
		if j < 0 {
			return nil, 0, false, ErrNotProbeOutput
		}
		i = end + 1
	}
	if version != probeVersion {
		return nil, version, false, fmt.Errorf("%w: probe version %d, want %d", ErrNotProbeOutput, version, probeVersion)
	}

	const (
		outside = iota
		inStdout
		inStderr
	)
	state := outside
	var cur *section
	var bodyStart int
	mk := []byte(marker + " ")
	closeCur := func(at int, complete bool) {
		if cur == nil {
			return
		}
		switch state {
		case inStdout:
			cur.stdout = out[bodyStart:max(at-1, bodyStart)]
		case inStderr:
			cur.stderr = out[bodyStart:max(at-1, bodyStart)]
		}
		cur.complete = complete
		secs = append(secs, *cur)
		cur = nil
		state = outside
	}
	for i < len(out) {
		j := bytes.IndexByte(out[i:], '\n')
		end := len(out)
		if j >= 0 {
			end = i + j
		}
		line := out[i:end]
		next := end + 1
		if !bytes.HasPrefix(line, mk) || bytes.HasPrefix(line[len(mk):], []byte("part ")) {
			i = next
			continue
		}
		verb, rest, _ := strings.Cut(string(line[len(mk):]), " ")
		switch verb {
		case "begin":
			closeCur(i, false)
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			cur = &section{name: fields[0], attrs: fields[1:]}
			state = inStdout
			bodyStart = min(next, len(out))
		case "skip":
			if cur != nil && state == inStdout {
				cur.skipped = rest
				if cur.skipped == "" {
					cur.skipped = "skipped"
				}
				cur.complete = true
				secs = append(secs, *cur)
				cur, state = nil, outside
			}
		case "stderr":
			if cur != nil && state == inStdout {
				cur.stdout = out[bodyStart:max(i-1, bodyStart)]
				state = inStderr
				bodyStart = min(next, len(out))
			}
		case "end":
			if cur != nil && state == inStderr {
				cur.stderr = out[bodyStart:max(i-1, bodyStart)]
				rc, perr := strconv.Atoi(strings.TrimSpace(rest))
				if perr != nil {
					rc = -1
				}
				cur.rc = rc
				cur.complete = true
				secs = append(secs, *cur)
				cur, state = nil, outside
			}
		case "done":
			closeCur(i, false)
			done = true
		}
		i = next
	}
	closeCur(len(out)+1, false)
	return secs, version, done, nil
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
