// HTTP: the probe's curl fragments (vLLM's /health and /v1/models) and their parsers.

package observe

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// httpHelpers fetch a loopback URL with curl or wget. curl appends the
// status code as a last line; wget prints the response headers on stderr.
const httpHelpers = `rf_via=none
if command -v curl >/dev/null 2>&1; then rf_via=curl; elif command -v wget >/dev/null 2>&1; then rf_via=wget; fi
rf_http() {
	case $rf_via in
	curl) rf_x curl -q -sS -m 2 -w '\n%{http_code}' "$1" ;;
	wget) rf_x wget -S -T 2 -O - "$1" ;;
	*)
		printf 'rayform: neither curl nor wget is installed\n' >&2
		return 127
		;;
	esac
}
`

// httpGet is one loopback URL the head's probe fetches, and the section its
// answer goes to.
type httpGet struct{ section, url string }

// curlWriteOut frames one transfer of writeCurlAll as a section: the body
// (already printed by curl), the status code as the last stdout line (as
// rf_http prints it), curl's error message as stderr and its exit code for
// this transfer as the section's exit code; then the next section's begin
// line, if any. %{errormsg} and %{exitcode} need curl 7.75 (2021).
func curlWriteOut(next string) string {
	w := "\\n%{http_code}\\n" + marker + " stderr\\n%{errormsg}\\n" + marker + " end %{exitcode}\\n"
	if next != "" {
		w += marker + " begin " + next + "\\n"
	}
	return w
}

// writeCurlAll fetches every URL with one curl process (one transfer per
// URL, separated by --next, each bounded by -m 2), each answer framed as
// its own section by curl's --write-out, so the parser reads them exactly
// as it reads rf_http's. -q keeps a ~/.curlrc from changing the output.
func writeCurlAll(b *strings.Builder, gets []httpGet) {
	if len(gets) == 0 {
		b.WriteString("\t:\n")
		return
	}
	b.WriteString("\tprintf '%s begin %s\\n' \"$M\" " + shell.Quote(gets[0].section) + "\n")
	b.WriteString("\tcurl -q")
	for i, g := range gets {
		if i > 0 {
			b.WriteString(" --next")
		}
		next := ""
		if i+1 < len(gets) {
			next = gets[i+1].section
		}
		b.WriteString(" -sS -m 2 -w " + shell.Quote(curlWriteOut(next)) + " " + shell.Quote(g.url))
	}
	b.WriteString(" </dev/null 2>/dev/null\n")
}

// parseHTTP reads the outcome of rf_http: the status and the body.
func parseHTTP(s *section) (HTTPCheck, []byte) {
	var hc HTTPCheck
	if s.skipped != "" || !s.complete {
		hc.Err = s.failure()
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
		hc.TimedOut = s.rc == 28 // CURLE_OPERATION_TIMEDOUT
	case "wget":
		// wget -S prints each response's status line on stderr.
		for line := range strings.SplitSeq(string(s.stderr), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/") {
				hc.Status, _ = strconv.Atoi(f[1])
			}
		}
		hc.Refused = hc.Status == 0 && bytes.Contains(s.stderr, []byte("Connection refused"))
		hc.TimedOut = hc.Status == 0 && bytes.Contains(s.stderr, []byte("timed out"))
	}
	switch {
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

func parseModels(s *section) (HTTPCheck, []Model) {
	hc, body := parseHTTP(s)
	if hc.Status != 200 {
		return hc, nil
	}
	var resp struct {
		Data []Model `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		hc.Err = "/v1/models: " + err.Error()
		return hc, nil
	}
	return hc, resp.Data
}
