package observe

import (
	"bytes"
	"strconv"
	"strings"
)

// splitIPBatch cuts the output of the probe's `ip -j -force -batch -` into
// one section per batch command (n commands): the i-th section's stdout is
// the JSON line answering command i, or, for a command ip reported as
// failed ("Command failed -:LINE" on stderr, after the command's own
// message), empty with rc 1 and that message as stderr. It serves the first
// round's batch (parseIPBatch) and the second round's (parseRouteBatch). Answered commands
// print exactly one line each, in order, so the answers are matched to the
// commands that did not fail. When the whole section failed (ip missing,
// probe killed), every command gets the section's failure.
func splitIPBatch(s *section, n int) []section {
	out := make([]section, n)
	if s.skipped != "" || !s.complete || s.rc == 127 {
		for i := range out {
			out[i] = section{skipped: s.skipped, complete: s.complete, rc: s.rc, stderr: s.stderr}
		}
		return out
	}
	failed := map[int]string{}
	prev := ""
	for line := range strings.SplitSeq(string(s.stderr), "\n") {
		line = strings.TrimSpace(line)
		if num, ok := strings.CutPrefix(line, "Command failed -:"); ok {
			if i, err := strconv.Atoi(num); err == nil {
				failed[i-1] = prev
			}
			prev = ""
			continue
		}
		if line != "" {
			prev = line
		}
	}
	var answers [][]byte
	for line := range bytes.SplitSeq(s.stdout, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 {
			answers = append(answers, t)
		}
	}
	next := 0
	for i := range out {
		out[i].complete = true
		if msg, ok := failed[i]; ok {
			if msg == "" {
				msg = "ip: command failed"
			}
			out[i].rc, out[i].stderr = 1, []byte(msg)
			continue
		}
		if next < len(answers) {
			out[i].stdout = answers[next]
			next++
			continue
		}
		// ip stopped before this command without saying why.
		out[i].rc, out[i].stderr = 1, []byte("ip: no answer")
		if msg := lastLine(s.stderr); msg != "" && !strings.HasPrefix(msg, "Command failed") {
			out[i].stderr = []byte(msg)
		}
	}
	return out
}

// parseIPBatch fills the network facts from the first round's ip batch:
// links and addresses, the routing table, the default source, and the route
// to each peer address of the section's addrs attribute.
func parseIPBatch(f *HostFacts, s *section) {
	var addrs []string
	if v := s.attr("addrs"); v != "" {
		addrs = strings.Split(v, ",")
	}
	parts := splitIPBatch(s, 3+len(addrs))
	f.Links, f.Addresses = parseAddr(&parts[0])
	f.Routes = parseRoutes(&parts[1])
	f.DefaultRoute = parseDefault(&parts[2])
	for i, a := range addrs {
		p := parts[3+i]
		p.attrs = []string{"addr=" + a}
		f.RouteChecks = append(f.RouteChecks, parseRouteGet(&p))
	}
}
