// The network: the probe's ip and TCP fragments (links, addresses, routes, route lookups, reachability, listeners) and their parsers.

package observe

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// tcpHelpers test a TCP connect: bash's /dev/tcp under timeout(1), else
// nc -z. Opening and closing a connection changes nothing on the peer.
const tcpHelpers = `rf_tcp() {
	if [ -n "$rf_t" ] && command -v bash >/dev/null 2>&1; then
		rf_t=3
		rf_x bash -c 'exec 3<>"/dev/tcp/$1/$2"' rf_tcp "$1" "$2"
	elif command -v nc >/dev/null 2>&1; then
		rf_x nc -z -w 3 "$1" "$2"
	else
		printf 'rayform: no way to test TCP (need bash and timeout, or nc)\n' >&2
		return 127
	fi
}
`

// check is one peer address to route to (and port to connect to, if > 0).
type check struct {
	addr netip.Addr
	port int
}

// staticChecks returns the checks of peers whose address the spec declares.
func staticChecks(peers []Peer) []check {
	var out []check
	for _, p := range peers {
		if p.Addr.IsValid() {
			out = append(out, check{addr: p.Addr, port: p.Port})
		}
	}
	return out
}

func hasTCP(checks []check) bool {
	for _, c := range checks {
		if c.port > 0 && c.port <= 65535 {
			return true
		}
	}
	return false
}

// writeIPBatch adds the first round's network section: one `ip -j -force
// -batch -` process answers `addr show`, `route show`, the route to
// internetProbeAddr and the route to every distinct peer address, one JSON
// array per line (see parseIPBatch). ip cannot hang (it asks the kernel over
// netlink), so it runs without timeout(1).
func writeIPBatch(b *strings.Builder, checks []check) {
	addrs := distinctAddrs(checks)
	var cmds strings.Builder
	cmds.WriteString("addr show\nroute show\nroute get " + internetProbeAddr + "\n")
	for _, a := range addrs {
		cmds.WriteString("route get " + a + "\n")
	}
	name := secIPBatch
	if len(addrs) > 0 {
		name += " addrs=" + strings.Join(addrs, ",")
	}
	b.WriteString("rf_sec " + shell.Quote(name) + " rf_ip " + shell.Quote(cmds.String()) + "\n")
}

// writeChecks adds the route lookups of every distinct address, batched in
// one `ip -j -force -batch -` (one process however many peers: N peers
// would otherwise cost N processes per host, N² across the cluster), and
// one TCP connect per distinct address and port.
func writeChecks(b *strings.Builder, checks []check) {
	addrs := distinctAddrs(checks)
	if len(addrs) > 0 {
		var cmds strings.Builder
		for _, a := range addrs {
			cmds.WriteString("route get " + a + "\n")
		}
		b.WriteString("rf_routes() { printf '%s' \"$1\" | ip -j -force -batch -; }\n")
		b.WriteString("rf_sec " + shell.Quote(secRouteBatch+" addrs="+strings.Join(addrs, ",")) + " rf_routes " + shell.Quote(cmds.String()) + "\n")
	}
	writeTCPChecks(b, checks)
}

// distinctAddrs returns the checks' addresses, each once, in order.
func distinctAddrs(checks []check) []string {
	seen := map[string]bool{}
	var addrs []string
	for _, c := range checks {
		a := c.addr.String()
		if !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// writeTCPChecks adds one TCP connect per distinct address and port.
func writeTCPChecks(b *strings.Builder, checks []check) {
	seen := map[string]bool{}
	for _, c := range checks {
		if c.port <= 0 || c.port > 65535 {
			continue
		}
		a, p := c.addr.String(), strconv.Itoa(c.port)
		if !seen[a+" "+p] {
			seen[a+" "+p] = true
			b.WriteString("rf_sec " + shell.Quote(secTCP+" addr="+a+" port="+p) + " rf_tcp " + a + " " + p + "\n")
		}
	}
}

func parseAddr(s *section) (LinkFacts, AddressFacts) {
	if msg := s.failure(); msg != "" {
		return LinkFacts{Err: msg}, AddressFacts{Err: msg}
	}
	var raw []ipAddrJSON
	if err := json.Unmarshal(s.stdout, &raw); err != nil {
		msg := "ip -j addr show: " + err.Error()
		return LinkFacts{Err: msg}, AddressFacts{Err: msg}
	}
	var lf LinkFacts
	var af AddressFacts
	for _, l := range raw {
		if l.Name == "" {
			continue
		}
		lf.List = append(lf.List, Link{
			Index: l.Index, Name: l.Name, MTU: l.MTU, OperState: l.OperState,
			Flags: l.Flags, MAC: l.Address, LinkType: l.LinkType, Master: l.Master,
		})
		for _, a := range l.AddrInfo {
			addr, err := netip.ParseAddr(a.Local)
			if err != nil {
				continue
			}
			p, err := addr.Prefix(a.PrefixLen)
			if err != nil {
				continue
			}
			// Keep the host bits: Prefix() masks them.
			af.List = append(af.List, Address{
				Interface: l.Name,
				Prefix:    netip.PrefixFrom(addr, p.Bits()),
				Scope:     a.Scope,
			})
		}
	}
	return lf, af
}

func parseAddrOrZero(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a
}

func parseRoutes(s *section) RouteFacts {
	if msg := s.failure(); msg != "" {
		return RouteFacts{Err: msg}
	}
	var raw []ipRouteJSON
	if err := json.Unmarshal(s.stdout, &raw); err != nil {
		return RouteFacts{Err: "ip -j route show: " + err.Error()}
	}
	rf := RouteFacts{List: make([]Route, 0, len(raw))}
	for _, r := range raw {
		rf.List = append(rf.List, Route{
			Dst: r.Dst, Gateway: parseAddrOrZero(r.Gateway), Dev: r.Dev,
			PrefSrc: parseAddrOrZero(r.PrefSrc), Protocol: r.Protocol,
			Scope: r.Scope, Type: r.Type, Metric: r.Metric,
		})
	}
	return rf
}

// routeGet decodes the single answer of `ip -j route get`.
func routeGet(s *section) (ipRouteJSON, string) {
	if msg := s.failure(); msg != "" {
		return ipRouteJSON{}, msg
	}
	var raw []ipRouteJSON
	if err := json.Unmarshal(s.stdout, &raw); err != nil {
		return ipRouteJSON{}, "ip -j route get: " + err.Error()
	}
	if len(raw) == 0 {
		return ipRouteJSON{}, "ip -j route get: empty answer"
	}
	return raw[0], ""
}

func parseDefault(s *section) DefaultRoute {
	r, msg := routeGet(s)
	if msg != "" {
		return DefaultRoute{Err: msg}
	}
	return DefaultRoute{Src: parseAddrOrZero(r.PrefSrc), Dev: r.Dev, Gateway: parseAddrOrZero(r.Gateway)}
}

func parseRouteGet(s *section) RouteCheck {
	rc := RouteCheck{Addr: parseAddrOrZero(s.attr("addr"))}
	r, msg := routeGet(s)
	if msg != "" {
		rc.Err = msg
		return rc
	}
	rc.Dev, rc.Src, rc.Gateway = r.Dev, parseAddrOrZero(r.PrefSrc), parseAddrOrZero(r.Gateway)
	return rc
}

func parseTCP(s *section) TCPCheck {
	port, _ := strconv.Atoi(s.attr("port"))
	tc := TCPCheck{Addr: parseAddrOrZero(s.attr("addr")), Port: port}
	if msg := s.failure(); msg != "" {
		tc.Err = msg
		if bytes.Contains(s.stderr, []byte("Connection refused")) || bytes.Contains(s.stderr, []byte("connection refused")) {
			tc.Err = "connection refused"
		}
		return tc
	}
	tc.Open = true
	return tc
}

// parseRouteBatch reads `ip -j -force -batch -` of one "route get" per
// address of the section's addrs attribute (see splitIPBatch).
func parseRouteBatch(s *section) []RouteCheck {
	addrs := strings.Split(s.attr("addrs"), ",")
	parts := splitIPBatch(s, len(addrs))
	out := make([]RouteCheck, len(addrs))
	for i, a := range addrs {
		p := parts[i]
		p.attrs = []string{"addr=" + a}
		out[i] = parseRouteGet(&p)
	}
	return out
}

// parseListen reads `ss -Hltnp` (State Recv-Q Send-Q Local Peer Process),
// keeping the listeners on the section's ports:
//
//	LISTEN 0 4096 0.0.0.0:6379 0.0.0.0:* users:(("gcs_server",pid=4242,fd=7))
func parseListen(s *section) ListenFacts {
	if msg := s.failure(); msg != "" {
		return ListenFacts{Err: "ss -ltnp: " + msg}
	}
	if s.attr("ports") == "all" {
		return ListenFacts{List: ParseListeners(string(s.stdout), nil)}
	}
	want := map[int]bool{}
	for _, p := range strings.Split(s.attr("ports"), ",") {
		if n, err := strconv.Atoi(p); err == nil {
			want[n] = true
		}
	}
	return ListenFacts{List: ParseListeners(string(s.stdout), want)}
}

// ParseListeners reads the lines of `ss -Hltnp` (State Recv-Q Send-Q Local
// Peer Process) and returns the listeners on ports (every port when ports is
// nil), with the owner ss shows:
//
//	LISTEN 0 4096 0.0.0.0:6379 0.0.0.0:* users:(("gcs_server",pid=4242,fd=7))
func ParseListeners(out string, ports map[int]bool) []Listener {
	var list []Listener
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "LISTEN" {
			continue
		}
		local := f[3]
		i := strings.LastIndexByte(local, ':')
		if i < 0 {
			continue
		}
		port, err := strconv.Atoi(local[i+1:])
		if err != nil || (ports != nil && !ports[port]) {
			continue
		}
		l := Listener{Port: port, Addr: local}
		if len(f) > 5 {
			users := strings.Join(f[5:], " ")
			if _, rest, ok := strings.Cut(users, `(("`); ok {
				name, rest, _ := strings.Cut(rest, `"`)
				l.Process = name
				if _, pid, ok := strings.Cut(rest, "pid="); ok {
					pid, _, _ = strings.Cut(pid, ",")
					l.PID, _ = strconv.Atoi(pid)
				}
			}
		}
		list = append(list, l)
	}
	return list
}

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
