package diagnose

import (
	"bytes"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/rayform/rayform/engine/termtext"
)

// maxEvidence caps the length of an evidence line; the tail is elided.
const maxEvidence = 600

// maxTail is how many meaningful lines an Unknown diagnosis shows.
const maxTail = 15

// line is one line of one log, cleaned for matching.
type line struct {
	log  int    // index into scan.logs
	no   int    // 1-based line number in the log
	text string // the line, ANSI codes removed, valid UTF-8
	body string // text with process, level and timestamp prefixes removed
}

// scan holds the cleaned lines of every log and the context.
type scan struct {
	logs  []Log
	lines []line
	noise []bool   // lines that say nothing by themselves (see markNoise)
	span  [][2]int // per log, the [lo, hi) range of its lines in lines
	ctx   Context
}

var (
	// Prefixes a log line carries before its message, stripped repeatedly:
	// Ray/vLLM process tags, CI timestamps, docker logs -t's RFC 3339 stamp,
	// vLLM/Python logging headers, NCCL's "[2026-11-29 23:22:58] " stamp.
	prefixRE = regexp.MustCompile(`^(?:` +
		`\((?:[\w.\-]+)(?: pid=\d+)?(?:, ip=[0-9A-Fa-f.:]+)?(?:, [\w.\-]+=[^)]*)?\) ?` + // (EngineCore_DP0 pid=1544) (RayWorkerWrapper pid=249, ip=…) (raylet)
		`|\[\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\] ?` + // [2026-02-24T20:21:58Z]
		`|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ` + // docker logs -t: 2024-02-08T08:40:56.162202300Z
		`|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] ?` + // ERROR 06-30 13:53:19 [core.py:515]
		`|\[[\w.]+:\d+\] ?` + // [multiproc_executor.py:492]
		`)`)
	frameRE    = regexp.MustCompile(`^\s*(?:\[rank\d+\]:\s*)?File "[^"]*", line \d+`)
	progressRE = regexp.MustCompile(`\d+%\s*(?:Completed\s*)?\|.*\d+/\d+|it/s\]|s/it\]|█`)
	cppFrameRE = regexp.MustCompile(`^@\s+0x[0-9a-fA-F]+\s`)
	// Stack frames of other formats: torch's "frame #13: <fn> + 0x1f (0x7f in lib.so)",
	// c10's "# 0  c10::get_backtrace", gdb's "#0  0x00007f in f ()", glog's
	// "PC: @ 0x7f", torch's "Exception raised from run at socket.cpp:820
	// (most recent call first):" header and "<omitting python frames>".
	otherFrameRE = regexp.MustCompile(`^(?:\[rank\d+\]:\s*)?(?:frame #\d+: |#\s?\d+\s+\S|PC: @\s+0x|<omitting python frames>|Exception raised from \S+ at \S+ \(most recent call first\):)`)
)

// newScan splits and cleans every log of in.
func newScan(in Input) *scan {
	s := &scan{logs: in.Logs, ctx: in.Context, span: make([][2]int, len(in.Logs))}
	for i, l := range in.Logs {
		s.span[i][0] = len(s.lines)
		kept := l.kept
		if !l.windowed {
			kept = windowText(l.Text)
		}
		for _, raw := range kept {
			// A \r rewrites the terminal line (progress bars); each segment is a
			// line of its own, all with the same line number.
			for _, seg := range bytes.Split(raw.text, []byte("\r")) {
				t := clean(seg)
				if strings.TrimSpace(t) == "" {
					continue
				}
				s.lines = append(s.lines, line{log: i, no: raw.no, text: t, body: body(t)})
			}
		}
		s.span[i][1] = len(s.lines)
	}
	s.noise = s.markNoise()
	return s
}

// clean removes terminal control sequences and controls (termtext.Plain,
// the one home of that filtering), invalid UTF-8 and trailing blanks.
func clean(b []byte) string {
	t := string(termtext.Plain(b))
	if !utf8.ValidString(t) {
		t = strings.ToValidUTF8(t, "\uFFFD")
	}
	return strings.TrimRight(t, " \t")
}

// body strips the prefixes a line carries before its message.
func body(t string) string {
	for i := 0; i < 8; i++ {
		loc := prefixRE.FindStringIndex(t)
		if loc == nil || loc[1] == 0 {
			break
		}
		t = t[loc[1]:]
	}
	return t
}

// find returns the indices of the lines match accepts, in input order.
// Noise lines never match: a traceback's source lines quote the messages
// they raise ("raise RuntimeError(\"Engine core initialization failed\"").
func (s *scan) find(match func(body string) bool) []int {
	var hits []int
	for i, l := range s.lines {
		if !s.noise[i] && match(l.body) {
			hits = append(hits, i)
		}
	}
	return hits
}

// window joins the bodies of line i and up to n following lines of the same
// log with spaces, for messages that wrap across lines.
func (s *scan) window(i, n int) string {
	var b strings.Builder
	b.WriteString(s.lines[i].body)
	for j := i + 1; j < len(s.lines) && j <= i+n; j++ {
		if s.lines[j].log != s.lines[i].log {
			break
		}
		b.WriteByte(' ')
		b.WriteString(strings.TrimSpace(s.lines[j].body))
	}
	return b.String()
}

// evidence returns line i as Evidence, redacted and capped.
func (s *scan) evidence(i int) Evidence {
	l := s.lines[i]
	t := redact(l.text)
	if len(t) > maxEvidence {
		cut := maxEvidence
		for cut > 0 && !utf8.RuneStart(t[cut]) {
			cut--
		}
		t = t[:cut] + " …"
	}
	return Evidence{Host: s.logs[l.log].Host, Source: s.logs[l.log].Source, Line: t, LineNo: l.no}
}

// host returns the host of line i's log.
func (s *scan) host(i int) string { return s.logs[s.lines[i].log].Host }

// logSpan returns the [lo, hi) range of the lines of line i's log.
func (s *scan) logSpan(i int) (lo, hi int) {
	sp := s.span[s.lines[i].log]
	return sp[0], sp[1]
}

// isProgress reports whether b is a progress bar line (tqdm or vLLM's
// loader format).
func isProgress(b string) bool {
	return containsAny(b, "%", "it/s]", "s/it]", "█") && progressRE.MatchString(b)
}

// markNoise reports which lines say nothing by themselves: traceback headers
// and frames with their source lines and carets, C++ stack frames, progress
// bars.
func (s *scan) markNoise() []bool {
	n := make([]bool, len(s.lines))
	for i, l := range s.lines {
		b := l.body
		switch {
		case strings.TrimSpace(b) == "",
			strings.Trim(b, " \t^~") == "",
			strings.HasPrefix(strings.TrimSpace(b), "Traceback (most recent call last)"),
			strings.Contains(b, "During handling of the above exception"),
			strings.Contains(b, "The above exception was the direct cause"),
			strings.HasPrefix(strings.TrimSpace(b), "*** StackTrace Information ***"),
			cppFrameRE.MatchString(strings.TrimSpace(b)),
			otherFrameRE.MatchString(strings.TrimSpace(b)),
			isProgress(b):
			n[i] = true
		case frameRE.MatchString(b):
			n[i] = true
			// The indented source line printed under a frame.
			if j := i + 1; j < len(s.lines) && s.lines[j].log == l.log {
				nb := s.lines[j].body
				if (strings.HasPrefix(nb, " ") || strings.HasPrefix(nb, "\t")) && !frameRE.MatchString(nb) {
					n[j] = true
				}
			}
		}
	}
	return n
}

// tail returns the last max meaningful lines among idx (indices in input
// order), in input order, skipping noise and consecutive repeats.
func (s *scan) tail(idx []int, max int) []int {
	var out []int
	last := ""
	for k := len(idx) - 1; k >= 0 && len(out) < max; k-- {
		i := idx[k]
		if s.noise[i] {
			continue
		}
		if s.lines[i].body == last {
			continue
		}
		last = s.lines[i].body
		out = append(out, i)
	}
	for a, b := 0, len(out)-1; a < b; a, b = a+1, b-1 {
		out[a], out[b] = out[b], out[a]
	}
	return out
}

// isSecretName reports whether an env-like or flag name holds a secret:
// HF_TOKEN, AWS_SECRET_ACCESS_KEY, api_key, --hf-token — but not
// max_num_batched_tokens or tokenizer.
func isSecretName(name string) bool {
	u := strings.ToUpper(strings.Trim(name, `'"-`))
	if u == "" {
		return false
	}
	for _, p := range strings.FieldsFunc(u, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		switch p {
		case "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "APIKEY", "CREDENTIAL", "CREDENTIALS", "PAT":
			return true
		}
	}
	for _, suf := range []string{"TOKEN", "SECRET", "PASSWORD", "APIKEY"} {
		if strings.HasSuffix(u, suf) {
			return true
		}
	}
	return false
}

var (
	// NAME=VALUE, NAME = "VALUE", 'NAME': 'VALUE', "NAME": "VALUE",
	// NAME: VALUE, and a list value as vLLM prints its arguments:
	// 'api_key': ['sk-…'], api_key=['sk-…']. A quoted value or a list is
	// masked whole.
	pairRE = regexp.MustCompile(`(['"]?)([A-Za-z_][A-Za-z0-9_.\-]*)(['"]?)(\s*[=:]\s*)(?:\[([^\]]*)\]|"([^"]*)"|'([^']*)'|([^\s'",;})\]]+))`)
	// --flag VALUE, --flag=VALUE, --flag "VALUE", --flag='VALUE'.
	flagRE   = regexp.MustCompile(`(--[A-Za-z0-9][A-Za-z0-9\-]*)(=|\s+)(?:"([^"]*)"|'([^']*)'|([^\s'"]+))`)
	bearerRE = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]+`)
	// Authorization: Basic dXNlcjpwYXNz, Authorization: token ghp_...
	authRE  = regexp.MustCompile(`(?i)(authorization["']?\s*[:=]\s*["']?(?:basic|token|digest)\s+)[^\s"',]+`)
	tokenRE = regexp.MustCompile(`\b(?:hf_[A-Za-z0-9]{20,}|ghp_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b`)
	userRE  = regexp.MustCompile(`(://[^/\s:@]+:)[^/\s@]+@`)
)

// redacted replaces a secret value.
const redacted = "<redacted>"

// maskValue replaces a value, keeping the list brackets or quotes around it.
func maskValue(v string) string {
	if len(v) >= 2 {
		switch o, c := v[0], v[len(v)-1]; {
		case o == '[' && c == ']', o == '"' && c == '"', o == '\'' && c == '\'':
			return string(o) + redacted + string(c)
		}
	}
	return redacted
}

// redactProse hides the secrets that can reach rayform's own sentences
// through values parsed from a log (URLs, tokens): bearer and
// Authorization values, URL passwords, bare tokens. NAME=VALUE pairs are
// left alone there: the fixes spell out HF_TOKEN=<a token ...> themselves.
func redactProse(t string) string {
	t = bearerRE.ReplaceAllString(t, "${1}"+redacted)
	t = authRE.ReplaceAllString(t, "${1}"+redacted)
	t = userRE.ReplaceAllString(t, "${1}"+redacted+"@")
	return tokenRE.ReplaceAllString(t, redacted)
}

// redact hides the values of secret-looking pairs, flags, bearer tokens,
// URL passwords and bare Hugging Face / GitHub tokens.
func redact(t string) string {
	t = pairRE.ReplaceAllStringFunc(t, func(m string) string {
		sm := pairRE.FindStringSubmatch(m)
		if !isSecretName(sm[2]) || strings.Contains(m[len(sm[1])+len(sm[2])+len(sm[3])+len(sm[4]):], redacted) {
			return m
		}
		return sm[1] + sm[2] + sm[3] + sm[4] + maskValue(m[len(sm[1])+len(sm[2])+len(sm[3])+len(sm[4]):])
	})
	t = flagRE.ReplaceAllStringFunc(t, func(m string) string {
		sm := flagRE.FindStringSubmatch(m)
		v := m[len(sm[1])+len(sm[2]):]
		if !isSecretName(sm[1]) || strings.HasPrefix(v, "-") {
			return m
		}
		return sm[1] + sm[2] + maskValue(v)
	})
	t = bearerRE.ReplaceAllString(t, "${1}"+redacted)
	t = authRE.ReplaceAllString(t, "${1}"+redacted)
	t = userRE.ReplaceAllString(t, "${1}"+redacted+"@")
	return tokenRE.ReplaceAllString(t, redacted)
}
