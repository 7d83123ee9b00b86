// HTTP: the probe's loopback GETs (HostSpec.HTTP), the guard that sends
// one only to the process it is meant for, and their parser.

package observe

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// HTTPBodyMax is the most bytes of one HTTP answer the probe reads: on
// the host (curl's --max-filesize, and the answers' output cut by head -c)
// and again where the answer is parsed. A longer answer is Oversized and
// not read. The largest answer rayform asks for is Ray's node table at its
// limit of 1000 nodes (/api/v0/nodes, about 1.5 KB a node) or Ray's
// usage report of as many; vLLM's /metrics is some 100 KB: 4 MiB holds
// them with room, and bounds what a hostile head can make plan or status
// hold.
const HTTPBodyMax = 4 << 20

// httpFrameRoom is what one answer's framing adds to its body in the
// probe's output: the status line, curl's error message and exit code,
// and the next answer's begin line (its URL is at most 1024 bytes).
const httpFrameRoom = 4 << 10

// HTTPProbe is one loopback GET the probe makes; its answer is
// HostFacts.HTTP[URL].
type HTTPProbe struct {
	// URL is http://127.0.0.1:PORT/PATH[?QUERY], of letters, digits and
	// "/._-~?=&:" only.
	URL string
	// Owner, when set, is the container whose processes must hold the
	// port's listening socket: the GET is sent only then. A port held by
	// another process (a foreign server, another project's container) is
	// not sent the request; its answer says what holds it
	// (HTTPCheck.HeldBy). Ownership is read from the listener's
	// process (ss -ltnp) and that process's cgroup, which names the
	// container's ID; when ss cannot show the process (the probe runs
	// without root and another user owns it) the GET is sent.
	Owner string
	// Fallback, when set, is a command run with docker exec in Owner when
	// the host has neither curl nor wget; its stdout stands for the body
	// (HTTPResult.Via is "exec").
	Fallback []string
	// Bearer, when set, is the lock name (a path segment) whose bearer
	// token file (BearerFile, made by the lock holder) curl sends as the
	// request's Authorization header, read from the file (-H @FILE), so
	// the token stands on no command line. A host without the file sends
	// no header.
	Bearer string
}

// Port is the URL's port.
func (p HTTPProbe) Port() int {
	u, err := url.Parse(p.URL)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(u.Port())
	return n
}

func (p HTTPProbe) validate() error {
	if !validLoopbackURL(p.URL) {
		return fmt.Errorf("http probe %q: want http://127.0.0.1:PORT/PATH of letters, digits and \"/._-~?=&:\"", p.URL)
	}
	if p.Owner != "" && !validContainer(p.Owner) {
		return fmt.Errorf("http probe %s: owner %q: not a container name", p.URL, p.Owner)
	}
	for _, a := range p.Fallback {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("http probe %s: fallback argument contains a NUL byte", p.URL)
		}
	}
	if p.Bearer != "" && !validSegment(p.Bearer) {
		return fmt.Errorf("http probe %s: bearer %q: not a lock name", p.URL, p.Bearer)
	}
	if len(p.Fallback) > 0 && p.Owner == "" {
		return fmt.Errorf("http probe %s: a fallback needs an owner container to run in", p.URL)
	}
	return nil
}

// validLoopbackURL accepts http://127.0.0.1:PORT followed by a path of
// safe bytes: the URL is a word of the script and of curl's --write-out
// (where '%' and '\\' would be directives).
func validLoopbackURL(s string) bool {
	const prefix = "http://127.0.0.1:"
	if len(s) > 1024 || !strings.HasPrefix(s, prefix) {
		return false
	}
	rest := s[len(prefix):]
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return false
	}
	port, err := strconv.Atoi(rest[:i])
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != rest[:i] {
		return false
	}
	for j := i; j < len(rest); j++ {
		if !isAlnum(rest[j]) && strings.IndexByte("/._-~?=&:", rest[j]) < 0 {
			return false
		}
	}
	return true
}

// HTTPResult is the answer to one HTTPProbe.
type HTTPResult struct {
	HTTPCheck
	// Via is how it was fetched: "curl", "wget", "exec" (the Fallback) or
	// "none".
	Via string `json:"via,omitempty"`
	// Body is the response body (the Fallback's stdout for "exec").
	Body string `json:"body,omitempty"`
}

// httpHelpers fetch a loopback URL with curl or wget, at most
// rf_hmax (HTTPBodyMax, set by writeHTTP) bytes of it: curl appends the
// status code as a last line; wget prints the response headers on stderr.
// rf_cap cuts a command's stdout one byte past its bound (head -c, which
// then ends the command by SIGPIPE on its next write), so that the parser
// tells a body of exactly the bound from a longer one; it keeps the
// command's exit code. A host without head(1) (coreutils and busybox have
// it) runs the command uncut: curl's --max-filesize, the clients'
// timeouts and the parser's own bound are then what is left.
const httpHelpers = `rf_via=none
if command -v curl >/dev/null 2>&1; then rf_via=curl; elif command -v wget >/dev/null 2>&1; then rf_via=wget; fi
# rf_cap MAX CMD...: CMD's stdout, its first MAX bytes; CMD's exit code.
rf_cap() {
	rf_cm=$1
	shift
	if ! command -v head >/dev/null 2>&1; then
		"$@"
		return
	fi
	{ rf_cc=$( { { "$@" 4>&- 5>&-; printf '%d' "$?" >&5; } | head -c "$rf_cm" >&4; } 5>&1); } 4>&1
	return "${rf_cc:-1}"
}
rf_http() {
	case $rf_via in
	curl) rf_cap $((rf_hmax + 1)) rf_x curl -q -sS -m 2 --max-filesize "$rf_hmax" -w '\n%{http_code}' "$1" ;;
	wget) rf_cap $((rf_hmax + 1)) rf_x wget -S -T 2 -O - "$1" ;;
	*)
		printf 'rayform: neither curl nor wget is installed\n' >&2
		return 127
		;;
	esac
}
# rf_owner PORT CONTAINER: whether a process of CONTAINER holds the listening
# socket of PORT: its cgroup (/proc/PID/cgroup, read with the shell) names
# the container's ID, which docker ps gave (rf_ps). Otherwise rf_why names
# the holder. Nothing listening, or listeners whose process ss cannot show
# (another user's, without root), or no ss at all: yes (a GET to a closed
# port is refused; an unknown owner cannot be told apart). rf_la is the
# address the owner's socket is bound to when it is one address of the
# host (a server bound to the fabric only), "" for every address or
# loopback: the GET goes there (curl --connect-to) instead of 127.0.0.1.
rf_owner() {
	rf_why=
	rf_la=
	[ "$rf_sok" = 1 ] || return 0
	rf_id=
	rf_ifs=$IFS
	IFS='
'
	for rf_l in $rf_ps; do
		case $rf_l in *"\"Names\":\"$2\""*)
			rf_id=${rf_l#*\"ID\":\"}
			rf_id=${rf_id%%\"*}
			;;
		esac
	done
	for rf_l in $rf_ss; do
		case $rf_l in *:"$1 "*) ;; *) continue ;; esac
		rf_u=${rf_l#*users:}
		while :; do
			case $rf_u in *'("'*pid=*) ;; *) break ;; esac
			rf_u=${rf_u#*'("'}
			rf_n=${rf_u%%'"'*}
			rf_u=${rf_u#*pid=}
			rf_p=${rf_u%%[!0-9]*}
			if [ -n "$rf_id" ] && [ -n "$rf_p" ] && rf_incg "$rf_p" "$rf_id"; then
				IFS=$rf_ifs
				rf_why=
				rf_la=$(rf_bound "$rf_l")
				return 0
			fi
			rf_why="$rf_n (pid $rf_p)"
		done
	done
	IFS=$rf_ifs
	[ -z "$rf_why" ]
}
# rf_bound LINE: the local address of an ss -ltn line when it is one
# address other than loopback ("" for 0.0.0.0, *, [::] and 127.0.0.1).
rf_bound() {
	set -- $1
	case ${4%:*} in 0.0.0.0 | '*' | '[::]' | 127.0.0.1 | '') ;; *) printf '%s' "${4%:*}" ;; esac
}
# rf_incg PID ID: whether PID's cgroup names ID.
rf_incg() {
	[ -r "/proc/$1/cgroup" ] || return 1
	while IFS= read -r rf_c; do
		case $rf_c in *"$2"*) return 0 ;; esac
	done <"/proc/$1/cgroup"
	return 1
}
`

// httpSection is the section of the answer to url, fetched via via.
func httpSection(url, via string) string { return secHTTP + " via=" + via + " url=" + url }

// curlWriteOut frames one transfer of writeHTTP's curl as a section: the
// body (already printed by curl), the status code as the last stdout line
// (as rf_http prints it), curl's error message as stderr and its exit code
// for this transfer as the section's exit code. The next transfer's begin
// line follows it (see writeHTTP). %{errormsg} and %{exitcode} need curl
// 7.75 (2021).
func curlWriteOut() string {
	return "\\n%{http_code}\\n" + marker + " stderr\\n%{errormsg}\\n" + marker + " end %{exitcode}\\n"
}

// writeHTTP adds the GETs of probes. First the guards: a probe with an
// Owner whose port another process holds is not sent, and gets a section
// saying what holds it (rf_g<i> is 1 for each probe to send). Then, with
// curl, every GET to send in one curl process (one transfer per URL,
// separated by --next, each bounded by -m 2 and --max-filesize), each
// answer framed as its own section by curl's --write-out so the parser
// reads it exactly as rf_http's; curl's whole output is cut at what the
// answers may take (rf_cap: curl before 8.4 applies --max-filesize only
// to a declared length, so one streamed answer can use the others' room,
// and the answers after it are then missing: unknown, never read); the argument list is built from the last probe to the first,
// so that each transfer's --write-out can begin the next sent one's
// section. Without curl, each GET is rf_http (wget), or the probe's
// Fallback in its Owner when there is no HTTP client at all.
func writeHTTP(b *strings.Builder, probes []HTTPProbe) {
	var ok []HTTPProbe
	seen := map[string]bool{}
	for _, p := range probes {
		if p.validate() == nil && !seen[p.URL] {
			seen[p.URL] = true
			ok = append(ok, p)
		}
	}
	if len(ok) == 0 {
		return
	}
	fmt.Fprintf(b, "rf_hmax=%d\n", HTTPBodyMax)
	for i, p := range ok {
		fmt.Fprintf(b, "rf_a%d=\n", i)
		if p.Bearer != "" {
			fmt.Fprintf(b, "rf_h%d=\"$HOME/.rayform/locks/\"%s; [ -r \"$rf_h%d\" ] || rf_h%d=/dev/null\n", i, shell.Quote(BearerFile(p.Bearer)), i, i)
		} else {
			fmt.Fprintf(b, "rf_h%d=/dev/null\n", i)
		}
		if p.Owner == "" {
			fmt.Fprintf(b, "rf_g%d=1\n", i)
			continue
		}
		fmt.Fprintf(b, "if rf_owner %d %s; then rf_g%d=1; rf_a%d=$rf_la; else rf_g%d=0; rf_skip %s \"held by $rf_why\"; fi\n",
			p.Port(), shell.Quote(p.Owner), i, i, i, shell.Quote(httpSection(p.URL, "guard")))
	}
	b.WriteString("if [ \"$rf_via\" = curl ]; then\n")
	b.WriteString("\tset --\n\trf_nx=\n")
	for i := len(ok) - 1; i >= 0; i-- {
		p := ok[i]
		sec := httpSection(p.URL, "curl")
		fmt.Fprintf(b, "\tif [ \"$rf_g%d\" = 1 ]; then\n", i)
		target := fmt.Sprintf("127.0.0.1:%d:", p.Port())
		b.WriteString("\t\tset -- -sS -m 2 --max-filesize \"$rf_hmax\" -H \"@$rf_h" + strconv.Itoa(i) + "\" --connect-to " + shell.Quote(target) + "\"${rf_a" + strconv.Itoa(i) + ":-127.0.0.1}\"" + shell.Quote(":"+strconv.Itoa(p.Port())) +
			" -w " + shell.Quote(curlWriteOut()) + "\"${rf_nx:+$M begin $rf_nx\\\\n}\" " +
			shell.Quote(p.URL) + " ${rf_nx:+--next} \"$@\"\n")
		b.WriteString("\t\trf_nx=" + shell.Quote(sec) + "\n")
		b.WriteString("\tfi\n")
	}
	b.WriteString("\tif [ -n \"$rf_nx\" ]; then\n")
	b.WriteString("\t\tprintf '%s begin %s\\n' \"$M\" \"$rf_nx\"\n")
	fmt.Fprintf(b, "\t\trf_cap %d curl -q \"$@\" </dev/null 2>/dev/null\n", len(ok)*(HTTPBodyMax+httpFrameRoom))
	// After a cut, the next section begins on a line of its own.
	b.WriteString("\t\tprintf '\\n'\n")
	b.WriteString("\tfi\n")
	b.WriteString("else\n")
	for i, p := range ok {
		fmt.Fprintf(b, "\tif [ \"$rf_g%d\" != 1 ]; then\n\t\t:\n", i)
		if len(p.Fallback) > 0 {
			b.WriteString("\telif [ \"$rf_via\" = none ] && [ \"$rf_dok\" = 1 ]; then\n")
			b.WriteString("\t\trf_sec " + shell.Quote(httpSection(p.URL, "exec")) + " rf_cap $((rf_hmax + 1)) rf_x docker exec " + shell.Quote(p.Owner) + " " + shell.Join(p.Fallback) + "\n")
		}
		b.WriteString("\telse\n")
		b.WriteString("\t\trf_sec \"" + secHTTP + " via=$rf_via url=" + p.URL + "\" rf_http " + shell.Quote(p.URL) + "\n")
		b.WriteString("\tfi\n")
	}
	b.WriteString("fi\n")
}

// oversized is the error of an answer longer than HTTPBodyMax.
var oversized = fmt.Sprintf("the answer is larger than %d bytes: not read", HTTPBodyMax)

// parseHTTP reads the outcome of rf_http: the status and the body. An
// answer the probe could not read whole (HTTPCheck.Unread) has no body:
// longer than HTTPBodyMax (the probe cuts it one byte past), cut by
// curl's --max-filesize, or ended before its end.
func parseHTTP(s *section) (HTTPCheck, []byte) {
	var hc HTTPCheck
	if by, ok := strings.CutPrefix(s.skipped, "held by "); ok {
		hc.HeldBy = by
		hc.Err = "port held by " + by
		return hc, nil
	}
	if s.skipped == "" && !s.complete && len(s.stdout) > HTTPBodyMax {
		// Cut by the probe's bound (rf_cap) inside the body.
		hc.Oversized, hc.Err = true, oversized
		return hc, nil
	}
	if s.skipped != "" || !s.complete {
		hc.Err = s.failure()
		hc.Incomplete = s.skipped == ""
		return hc, nil
	}
	body := s.stdout
	switch s.attr("via") {
	case "curl":
		// curl -w '\n%{http_code}': the status is the last line.
		k := bytes.LastIndexByte(body, '\n')
		if k >= 0 {
			hc.Status, _ = strconv.Atoi(string(bytes.TrimSpace(body[k+1:])))
			body = body[:k]
		}
		hc.Refused = s.rc == 7
		hc.TimedOut = s.rc == 28  // CURLE_OPERATION_TIMEDOUT
		hc.Oversized = s.rc == 63 // CURLE_FILESIZE_EXCEEDED: --max-filesize
		// Any other failure after the status came cut the body short.
		hc.Incomplete = s.rc != 0 && hc.Status == 200 && !hc.TimedOut && !hc.Oversized
	case "wget":
		// wget -S prints each response's status line on stderr.
		for line := range strings.SplitSeq(string(s.stderr), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/") {
				hc.Status, _ = strconv.Atoi(f[1])
			}
		}
		hc.Refused = hc.Status == 0 && bytes.Contains(s.stderr, []byte("Connection refused"))
		hc.TimedOut = bytes.Contains(s.stderr, []byte("timed out"))
		// rf_cap keeps wget's exit code: one that is not 0 after a 200
		// came (a read error, killed by timeout(1)) cut the body. (wget
		// exits 8 on an error status: that answer is whole.)
		hc.Incomplete = s.rc != 0 && hc.Status == 200 && !hc.TimedOut
	case "exec":
		// The Fallback's stdout is the body; it either answered or not.
		if len(body) > HTTPBodyMax {
			hc.Oversized, hc.Err = true, oversized
			return hc, nil
		}
		if hc.Err = s.failure(); hc.Err == "" {
			hc.Status = 200
		}
		return hc, body
	}
	if len(body) > HTTPBodyMax {
		hc.Oversized = true
	}
	switch {
	case hc.Oversized:
		hc.Err = oversized
		return hc, nil
	case hc.TimedOut && hc.Status != 0, hc.Incomplete:
		// The answer began but did not end: its body is not read.
		if hc.Err = s.failure(); hc.Err == "" {
			hc.Err = "the answer ended before its end"
		}
		return hc, nil
	case hc.Refused:
		hc.Err = "connection refused"
	case hc.Status == 0:
		if hc.Err = s.failure(); hc.Err == "" {
			hc.Err = "no HTTP response"
		}
	case hc.Status != 200:
		hc.Err = "HTTP " + strconv.Itoa(hc.Status)
	}
	return hc, body
}

// parseHTTPResult reads one section of writeHTTP.
func parseHTTPResult(s *section) HTTPResult {
	hc, body := parseHTTP(s)
	return HTTPResult{HTTPCheck: hc, Via: s.attr("via"), Body: string(body)}
}
