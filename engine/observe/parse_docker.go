package observe

import "bytes"

// dockerFromContainers derives the Docker facts from the container listing
// when the probe ran no `docker version` (see dockerHelpers): the daemon
// answered when docker ps succeeded, which the "part inspect" line after
// its output says. The versions stay unknown.
func dockerFromContainers(secs []section) Docker {
	for i := range secs {
		s := &secs[i]
		if s.name != secContainers {
			continue
		}
		d := Docker{Installed: true}
		switch {
		case s.skipped != "" || !s.complete:
			d.Err = s.failure()
		case s.hasPart("inspect"):
			d.Available = true
		case s.rc == 127 && bytes.Contains(s.stderr, []byte("not installed")):
			d.Installed = false
			d.Err = s.failure()
		default:
			if d.Err = s.failure(); d.Err == "" {
				d.Err = "docker ps: no answer"
			}
		}
		return d
	}
	return Docker{}
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
