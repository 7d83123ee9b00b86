package diagnose

import (
	"fmt"
	"regexp"
	"strings"
)

// The fatal error: whatever the rules know, a failed process printed the
// error that ended it — a Python exception, a glog FATAL line, the
// container runtime's refusal, an NCCL WARN. fatalError finds it in any
// log, on which host and in which component, so that a failure no rule
// knows is still named by its own words: the title and explanation quote
// it and the fix is the one the message gives. Wrapper errors that only
// report another process's failure (vLLM's "Engine core initialization
// failed", Ray's "The actor died unexpectedly", a broken pipe) are
// consequences, ranked under the error they follow.

// fatalRank orders candidates: a process-ending error before a line that
// only reports one.
type fatalRank int

const (
	rankNone        fatalRank = iota
	rankConsequence           // a wrapper or a peer's broken connection
	rankLogged                // an ERROR/CRITICAL line, an NCCL WARN
	rankFatal                 // an exception, a FATAL line, a runtime refusal
)

// rayLevel starts the level of Ray's C++ log lines (src/ray/util/logging.cc:
// "[%Y-%m-%d %H:%M:%S,%e %L %P %t]", the level one letter: I, W, E, C for
// RAY_LOG(FATAL)), also behind Ray's "(raylet) " tag.
const rayLevel = `(?:^|\) )\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} `

var (
	// excRE is a Python exception line as a traceback ends:
	// "torch.OutOfMemoryError: CUDA out of memory. ...",
	// "ray.exceptions.RayTaskError(ValueError): ray::...".
	excRE = regexp.MustCompile(`^(?:\[rank\d+\]:\s*)?((?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)))(?:\((\w+)\))?(?::\s*(.*))?$`)
	// levelRE is a logger's ERROR/CRITICAL/FATAL level: vLLM's and
	// Python's ("ERROR 06-30 ...", "ERROR:root:", "[ERROR]"), Ray's and
	// glog's ("E1203 12:00:00.1 ...", "F1203 ...", "[... E ...]").
	levelRE        = regexp.MustCompile(`(?:^|[\s\[(])(?:ERROR|CRITICAL|FATAL)(?:[\s\]:)]|$)|^[EF]\d{4} \d\d:\d\d:\d\d|` + rayLevel + `[EFC] `)
	glogFatalRE    = regexp.MustCompile(`^F\d{4} \d\d:\d\d:\d\d|\[FATAL\]|\bCheck failed: |^Fatal Python error: |Segmentation fault|\*\*\* SIG[A-Z]+ received|Aborted \(core dumped\)|` + rayLevel + `[FC] `)
	runtimeRE      = regexp.MustCompile(`^(?:docker: )?Error response from daemon: |nvidia-container-cli: |OCI runtime (?:create|exec) failed|^Error: `)
	ncclWarnLineRE = regexp.MustCompile(`\bNCCL WARN\b`)
	// procTagRE names the process that printed a line: vLLM's and Ray's
	// "(EngineCore_DP0 pid=1544)", "(RayWorkerWrapper pid=249, ip=…)",
	// "(raylet)", torch's "[rank0]:".
	procTagRE = regexp.MustCompile(`^\(([\w.\-]+)(?: pid=\d+)?[^)]*\)|^\[rank(\d+)\]:`)
	// wrapperRE are messages that report a failure printed elsewhere.
	wrapperRE = regexp.MustCompile(`(?i)Engine core initialization failed|EngineCore failed to start|Engine process failed to start|See (?:the )?root cause above|See stack trace for the root cause|WorkerProc (?:initialization )?failed|Worker proc \S+ died|The actor died unexpectedly|actor died|died unexpectedly|Worker failed with error|worker died|exited with code|terminated with signal|Failed core proc|Connection reset by peer|Broken pipe|Parent process exited`)
	// hintRE starts a sentence that says what to do.
	hintRE = regexp.MustCompile(`(?i)^(?:please |you (?:can|may|should|must|need|might)|if you|to (?:fix|resolve|use|enable|disable|avoid|solve|bypass|override|allow|work around)|try|consider|make sure|ensure|set|unset|use|increase|decrease|reduce|lower|raise|update|upgrade|downgrade|install|reinstall|check|run|pass|specify|enable|disable|add|remove|free|restart)\b`)
	// sentenceRE splits a message into sentences.
	sentenceRE = regexp.MustCompile(`[.!?;](?:\s+|$)`)
)

// consequenceTypes are exception types that report a failure elsewhere
// or the process being stopped, not a cause.
var consequenceTypes = map[string]bool{
	"SystemExit": true, "KeyboardInterrupt": true, "CancelledError": true, "BrokenPipeError": true,
	"ConnectionResetError": true, "EOFError": true, "EngineDeadError": true, "ActorDiedError": true,
	"RayActorError": true, "ChildFailedError": true, "ActorUnavailableError": true, "WorkerCrashedError": true,
	"GetTimeoutError": true, "StopIteration": true, "GeneratorExit": true, "TimeoutError": false,
}

// fatalCandidate is one line that may be the error that ended a process.
type fatalCandidate struct {
	i    int
	rank fatalRank
	typ  string // the exception type (inner type of a RayTaskError), "" for others
	msg  string // the message
}

// classifyFatal ranks line i as a fatal-error candidate.
func (s *scan) classifyFatal(i int) fatalCandidate {
	c := fatalCandidate{i: i}
	if s.noise[i] {
		return c
	}
	l := s.lines[i]
	b := l.body
	var m []string
	if isExc(b) {
		m = excRE.FindStringSubmatch(b)
	}
	switch {
	case m != nil && !strings.HasSuffix(m[2], "Warning"):
		c.typ, c.msg = m[2], strings.TrimSpace(m[4])
		if m[3] != "" { // RayTaskError(ValueError): the inner type is the error
			c.typ = m[3]
		}
		c.rank = rankFatal
		if consequenceTypes[c.typ] || consequenceTypes[m[2]] && m[3] == "" || wrapperRE.MatchString(c.msg) {
			c.rank = rankConsequence
		}
		if m[3] != "" && wrapperRE.MatchString(c.msg) {
			c.rank = rankConsequence
		}
		return c
	case isGlogFatal(b) || isGlogFatal(l.text):
		c.rank, c.msg = rankFatal, strings.TrimSpace(b)
	case isRuntime(b):
		c.rank, c.msg = rankFatal, strings.TrimSpace(b)
	case ncclWarnLineRE.MatchString(b):
		c.rank, c.msg = rankLogged, strings.TrimSpace(b)
	case hasErrorLevel(l.text) && (!hasErrorLevel(b) || rayLeveled(b)) || strings.HasPrefix(b, "ERROR:") || strings.HasPrefix(b, "CRITICAL:"):
		// The level was in a stripped prefix, or Ray's C++ line starts
		// with its own: an ERROR line of a logger.
		c.rank, c.msg = rankLogged, strings.TrimSpace(b)
	default:
		return c
	}
	if wrapperRE.MatchString(c.msg) {
		c.rank = rankConsequence
	}
	return c
}

// fatalCandidates returns the candidates of every log, in input order,
// without those a later line of their log shows were not fatal (see
// healthyAfter).
func (s *scan) fatalCandidates() []fatalCandidate {
	var out []fatalCandidate
	for k := range s.logs {
		lo, hi := s.span[k][0], s.span[k][1]
		var cands []fatalCandidate
		for i := lo; i < hi; i++ {
			if c := s.classifyFatal(i); c.rank != rankNone {
				cands = append(cands, c)
			}
		}
		for _, c := range cands {
			if !s.healthyAfter(c.i) {
				out = append(out, c)
			}
		}
	}
	return out
}

// fatalError finds the error that ended a process: the first candidate of
// the highest rank, in input order. ok is false when there is none.
func (s *scan) fatalError() (fatalCandidate, bool) {
	var best fatalCandidate
	for _, c := range s.fatalCandidates() {
		if c.rank > best.rank {
			best = c
		}
	}
	return best, best.rank != rankNone
}

// component names the process that printed line i.
func (s *scan) component(i int, typ string) string {
	t := s.lines[i].text
	if m := procTagRE.FindStringSubmatch(t); m != nil {
		switch tag := m[1]; {
		case m[2] != "":
			return "torch.distributed rank " + m[2]
		case strings.HasPrefix(tag, "EngineCore"):
			return "vLLM's engine core"
		case strings.HasPrefix(tag, "APIServer"):
			return "vLLM's API server"
		case strings.Contains(tag, "Worker") && strings.Contains(tag, "Ray"):
			return "a Ray worker of vLLM"
		case strings.HasPrefix(tag, "VllmWorker"), strings.HasPrefix(tag, "Worker"):
			return "a vLLM worker"
		case tag == "raylet" || tag == "gcs_server":
			return "Ray's " + tag
		}
	}
	b := s.lines[i].body
	switch {
	case strings.Contains(b, "nvidia-container-cli"), strings.Contains(b, "OCI runtime"), strings.Contains(b, "Error response from daemon"):
		return "the container runtime"
	case ncclWarnLineRE.MatchString(b), strings.Contains(b, "NCCL error"):
		return "NCCL"
	case glogFatalRE.MatchString(t) && (strings.Contains(t, "raylet") || strings.Contains(t, ".cc:")):
		return "Ray"
	}
	full := excRE.FindStringSubmatch(b)
	switch {
	case full != nil && strings.HasPrefix(full[1], "torch."):
		return "torch"
	case full != nil && strings.HasPrefix(full[1], "ray."):
		return "Ray"
	case full != nil && strings.HasPrefix(full[1], "huggingface_hub."):
		return "the Hugging Face Hub client"
	case full != nil && strings.HasPrefix(full[1], "transformers."):
		return "transformers"
	}
	return "the process"
}

// fixFromMessage returns the sentences of msg (and the lines that continue
// it) that say what to do, or "".
func fixFromMessage(msg string) string {
	var hints []string
	for _, sent := range splitSentences(msg) {
		if hintRE.MatchString(sent) {
			hints = append(hints, sent)
		}
	}
	return strings.Join(hints, " ")
}

// splitSentences splits text into trimmed sentences, keeping their stops.
func splitSentences(text string) []string {
	var out []string
	last := 0
	for _, loc := range sentenceRE.FindAllStringIndex(text, -1) {
		// A stop inside a number or a name (1.5, vllm.config) does not end
		// a sentence: the regexp requires a blank or the end after it.
		if s := strings.TrimSpace(text[last:loc[1]]); s != "" {
			out = append(out, s)
		}
		last = loc[1]
	}
	if s := strings.TrimSpace(text[last:]); s != "" {
		out = append(out, s)
	}
	return out
}

// continuation returns msg with the lines that continue it (a message
// that wraps: indented or plain lines up to the next blank, frame or
// logger line), at most n.
func (s *scan) continuation(i int, msg string, n int) string {
	var b strings.Builder
	b.WriteString(msg)
	_, hi := s.logSpan(i)
	runtime := isRuntime(s.lines[i].body)
	for j := i + 1; j < hi && j <= i+n; j++ {
		if runtime && isRuntime(s.lines[j].body) {
			// The runtime's stderr goes on: "nvidia-container-cli: …".
			b.WriteByte(' ')
			b.WriteString(strings.TrimSpace(s.lines[j].body))
			continue
		}
		if s.noise[j] || s.classifyFatal(j).rank != rankNone || hasErrorLevel(s.lines[j].text) || isExc(s.lines[j].body) {
			break
		}
		if s.procOf(j) != s.procOf(i) {
			// Another process's line (or a tagged line after an untagged
			// one): the message is one process's words only.
			break
		}
		b.WriteByte(' ')
		b.WriteString(strings.TrimSpace(s.lines[j].body))
	}
	return b.String()
}

// maxTitleMsg caps the quoted message in a title.
const maxTitleMsg = 240

// buildFatal reports the fatal error as the cause: its own words.
func (s *scan) buildFatal(c fatalCandidate) Diagnosis {
	i := c.i
	host := s.nodeOf(i)
	comp := s.component(i, c.typ)
	msg := c.msg
	if c.typ != "" {
		msg = c.typ + ": " + c.msg
		if c.msg == "" {
			msg = c.typ
		}
	}
	full := s.continuation(i, msg, 6)
	short := full
	if len(short) > maxTitleMsg {
		short = strings.ToValidUTF8(short[:maxTitleMsg], "") + " …"
	}
	ev := []Evidence{s.evidence(i)}
	for j := i + 1; j < len(s.lines) && j <= i+6 && s.lines[j].log == s.lines[i].log; j++ {
		if s.noise[j] || s.classifyFatal(j).rank != rankNone && !isRuntime(s.lines[j].body) || s.procOf(j) != s.procOf(i) {
			break
		}
		if strings.Contains(full, strings.TrimSpace(s.lines[j].body)) {
			ev = append(ev, s.evidence(j))
		}
	}
	fix := nextStep(comp, orDefault(host, "the host that printed it"))
	if hint := s.checkedAdvice(fixFromMessage(full)); hint != "" {
		fix += "\nThe message itself says: " + hint
	}
	return Diagnosis{
		Cause:       FatalError,
		Title:       comp + onHost(host) + " stopped on: " + short,
		Evidence:    ev,
		Explanation: "No rule of rayform's knows this failure; the error that ended " + comp + onHost(host) + " is quoted as the cause, in its own words:\n" + redactProse(full),
		Fix:         fix,
	}
}

// nextStep is the fix of a failure no rule knows: the layer of the
// component that printed the error, and the next diagnostic step for that
// layer — the command to run, on which host.
func nextStep(comp, host string) string {
	switch {
	case comp == "the container runtime":
		return "Layer: the container runtime (Docker and the NVIDIA container toolkit). On " + host + ": docker info (its runtimes), nvidia-container-cli -k -d /dev/tty info (what the toolkit sees of the driver and GPUs), journalctl -u docker --since -1h (the daemon's own account)."
	case comp == "NCCL":
		return "Layer: NCCL. Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET in every rank's environment (the containers' env, not only vllm serve's shell) and read the first NCCL WARN of the first rank that printed one, starting on " + host + "."
	case strings.Contains(comp, "vLLM"):
		return "Layer: vLLM. On " + host + ", rerun vllm serve with VLLM_LOGGING_LEVEL=DEBUG; the lines of the same process before the error say which step it was in (the weights, the KV cache, the CUDA graphs, the API server), and pip show vllm torch transformers in the container gives the versions to search the error under."
	case strings.HasPrefix(comp, "Ray"):
		return "Layer: Ray. On the head, ray status (nodes, resources, pending demands); on " + host + ", the Ray logs in the container under /tmp/ray/session_latest/logs (raylet.out, gcs_server.out, worker-*.err) around the time of the error."
	case strings.HasPrefix(comp, "torch"):
		return "Layer: torch and torch.distributed. Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL TORCH_CPP_LOG_LEVEL=INFO (and NCCL_DEBUG=INFO) in every rank's environment; on " + host + ", the lines before the error in the same process say which collective or rendezvous it was in."
	case comp == "the Hugging Face Hub client" || comp == "transformers":
		return "Layer: the Hugging Face Hub and its client. From " + host + ": huggingface-cli whoami (the token the node uses) and curl -sSI https://huggingface.co/api/models/<repo> (what the Hub answers for the model)."
	}
	return "Layer: the process's own code (Python). The traceback's last frames above the error name the package that raised it; on " + host + ", in the container: pip show <that package> for its version, and the lines before the error in the same log say what the process was doing."
}

// adviceEnvRE is an environment setting a message advises:
// "NCCL_DEBUG=INFO", "set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1".
var adviceEnvRE = regexp.MustCompile(`\b([A-Z][A-Z0-9_]{2,})=(\w+)`)

// checkedAdvice returns the advice a message gives (fixFromMessage's
// sentences), each setting it names checked against what the logs show:
// a setting the logs show already in force is marked as not applying
// here, with the line that shows it.
func (s *scan) checkedAdvice(hint string) string {
	if hint == "" {
		return ""
	}
	var notes []string
	said := splitSentences(hint)
	for _, m := range adviceEnvRE.FindAllStringSubmatch(hint, -1) {
		if j := s.settingShown(m[1], m[2], said); j >= 0 {
			notes = append(notes, fmt.Sprintf("the logs show %s=%s already in force (line %d), so that advice does not apply here", m[1], m[2], s.lines[j].no))
		}
	}
	if len(notes) > 0 {
		hint += " (" + strings.Join(notes, "; ") + ")"
	}
	return hint
}

// settingShown returns the first line that shows name=value in force —
// the setting itself, or for NCCL_DEBUG=INFO/WARN NCCL's own lines at that
// level — or -1. A line that gives the advice (holds one of the advice's
// sentences) does not show it in force.
func (s *scan) settingShown(name, value string, advice []string) int {
	for j, l := range s.lines {
		if containsAny(l.text, advice...) {
			continue
		}
		switch {
		case strings.Contains(l.text, name+"="+value), strings.Contains(l.text, name+" set by environment to "+value):
			return j
		case name == "NCCL_DEBUG" && (value == "INFO" || value == "WARN") && strings.Contains(l.text, "NCCL INFO"):
			return j
		}
	}
	return -1
}

var (
	// healthRE are the lines of a process that reached ready: vLLM's API
	// server up (uvicorn's line, or vLLM's own "Starting vLLM server on
	// http://…" where uvicorn's is not logged), Ray's node started, a
	// request served.
	healthRE = regexp.MustCompile(`Application startup complete|Uvicorn running on|Starting vLLM (?:API )?server on http|Ray runtime started|Started Ray on this node|Avg prompt throughput: |"(?:GET|POST) /(?:health|v1/\S+) HTTP/1\.[01]" 200|\bstate=ALIVE\b|All nodes are ALIVE`)
	// infoRE is a logger's INFO level (vLLM, Python, Ray, glog).
	infoRE = regexp.MustCompile(`(?:^|[\s\[(])INFO(?:[\s\]:])|^I\d{4} \d\d:\d\d:\d\d`)
	// stopWordRE marks an INFO line about stopping, not progress.
	// NCCL's INFO "file.cc:123 -> 6" lines trace an error's return code up
	// the stack: they are the error going on, not progress.
	stopWordRE = regexp.MustCompile(`(?i)-> \d+(?: \[[^\]]*\])?$|shut|stop|exit|terminat|kill|clean|destroy|abort|fail|error|dead|died|signal|tear|retry|retrying|waiting|timed out|timeout|not |unable|cannot|could not`)
)

// minProgress is how many INFO lines of normal progress after an error
// line show that its process went on (the error was not fatal).
const minProgress = 3

// healthyAfter reports whether the log of line i shows, after it, that its
// processes went on: a line of a process that reached ready, or (for an
// error line that is not an exception) normal progress of at least
// minProgress INFO lines with no other error in between.
func (s *scan) healthyAfter(i int) bool {
	return s.wentOnAfter(i, !isExc(s.lines[i].body))
}

// wentOnAfter reports whether the log of line i shows, after it, a line of
// a process that reached ready, or (when progress counts) normal progress
// of at least minProgress INFO lines with no other error in between.
func (s *scan) wentOnAfter(i int, progressCounts bool) bool {
	_, hi := s.logSpan(i)
	progress := 0
	logged := progressCounts
	for j := i + 1; j < hi; j++ {
		t := s.lines[j].text
		if isHealth(t) {
			return true
		}
		if s.noise[j] {
			continue
		}
		if !logged {
			continue
		}
		if hasErrorLevel(t) || isExc(s.lines[j].body) {
			progress = 0
			continue
		}
		if isInfo(t) && !stopWordRE.MatchString(s.lines[j].body) {
			progress++
			if progress >= minProgress {
				return true
			}
		}
	}
	return false
}

// healthy reports whether any log shows a process that reached ready, and
// the line that shows it.
func (s *scan) healthy() (int, bool) {
	for i, l := range s.lines {
		if isHealth(l.text) {
			return i, true
		}
	}
	return -1, false
}

// fatalShape reports whether a line (text, body) has the shape of a
// fatal-error candidate, for the bounded window's selection.
func fatalShape(text, b string) bool {
	return isExc(b) || isGlogFatal(text) || isRuntime(b) || ncclWarnLineRE.MatchString(b) || hasErrorLevel(text)
}

// The cheap tests before each regular expression: most lines of a long log
// contain none of their words.

func isExc(b string) bool {
	return containsAny(b, "Error", "Exception", "Exit", "Interrupt", "Failure", "Fault") && excRE.MatchString(b)
}

func hasErrorLevel(t string) bool {
	glog := len(t) > 5 && (t[0] == 'E' || t[0] == 'F') && t[1] >= '0' && t[1] <= '9'
	return (glog || containsAny(t, "ERROR", "CRITICAL", "FATAL") || rayLeveled(t)) && levelRE.MatchString(t)
}

func isGlogFatal(t string) bool {
	glog := len(t) > 5 && t[0] == 'F' && t[1] >= '0' && t[1] <= '9'
	return (glog || containsAny(t, "FATAL", "Check failed", "Fatal Python", "Segmentation fault", "*** SIG", "Aborted") || rayLeveled(t)) && glogFatalRE.MatchString(t)
}

// rayLeveled is the cheap test for Ray's C++ log line ("[2026-12-01
// 10:00:00,000 E 811 902] ..."): a ",ddd " followed by a level letter.
func rayLeveled(t string) bool {
	p := strings.Index(t, "[20")
	if p < 0 {
		return false
	}
	k := strings.IndexByte(t[p:], ',') + p
	return k > p && k+5 < len(t) && t[k+4] == ' ' && strings.IndexByte("EFC", t[k+5]) >= 0
}

func isRuntime(b string) bool {
	return containsAny(b, "Error response from daemon", "nvidia-container-cli", "OCI runtime", "Error: ") && runtimeRE.MatchString(b)
}

func isHealth(t string) bool {
	return containsAny(t, "Application startup", "Uvicorn running", "Starting vLLM", "Ray runtime started", "Started Ray", "Avg prompt", " 200", "ALIVE") && healthRE.MatchString(t)
}

func isInfo(t string) bool {
	glog := len(t) > 5 && t[0] == 'I' && t[1] >= '0' && t[1] <= '9'
	return (glog || strings.Contains(t, "INFO")) && infoRE.MatchString(t)
}

// reachedReady reports whether a line after i in its log shows a process
// that reached ready.
func (s *scan) reachedReady(i int) bool {
	_, hi := s.logSpan(i)
	for j := i + 1; j < hi; j++ {
		if isHealth(s.lines[j].text) {
			return true
		}
	}
	return false
}

// buildFatalRule is the FatalError rule: the fatal error of the logs, if
// there is one.
func buildFatalRule(s *scan, _ []int) (Diagnosis, bool) {
	c, ok := s.fatalError()
	if !ok || c.rank < rankLogged {
		return Diagnosis{}, false
	}
	return s.buildFatal(c), true
}

// fallback is the diagnosis when no rule named a cause: the error that
// ended a process when there is one (even one that only reports a failure
// elsewhere: its words are all the logs say), else no failure — a process
// that reached ready, or error lines its process went on past — and only
// with neither the last lines of the logs.
func (s *scan) fallback() Diagnosis {
	_, ready := s.healthy()
	// An error that only reports one elsewhere (a broken pipe, a dead
	// peer) is the failure's last word only when its process did not go
	// on past it.
	if c, ok := s.fatalError(); ok && !ready && (c.rank > rankConsequence || !s.wentOnAfter(c.i, true)) {
		return s.buildFatal(c)
	}
	if s.ctx.ReadyTimeout > 0 || s.ctx.ProcessExited {
		return s.unknown()
	}
	if i, ok := s.healthy(); ok {
		return s.buildHealthy(i, whyReady)
	}
	if i, ok := s.wentOn(); ok {
		return s.buildHealthy(i, whyWentOn)
	}
	return s.unknown()
}

// wentOn returns the first error line of the logs that its process went
// on past (normal progress after it, see healthyAfter): when no error
// ended a process, such a line is no failure.
func (s *scan) wentOn() (int, bool) {
	for i := range s.lines {
		r := s.classifyFatal(i).rank
		if !s.noise[i] && r != rankNone && (s.healthyAfter(i) || r == rankConsequence && s.wentOnAfter(i, true)) {
			return i, true
		}
	}
	return -1, false
}

// Why the logs show no failure (buildHealthy's reasons): a process reached
// ready (the line is the ready line), or error lines were passed over by
// their process (the line is the first of them).
const (
	whyReady  = "the processes reached ready"
	whyWentOn = "the error lines were followed by normal progress"
)

// buildHealthy says the logs show no failure, for the reason given, with
// line i as the evidence.
func (s *scan) buildHealthy(i int, why string) Diagnosis {
	expl := "The log shows a process that reached ready (the line above) and no error that ended a process after it; error lines before it were passed over."
	if why == whyWentOn {
		expl = "The error line above (and any like it) was followed by the normal progress of its process, and no error ended a process: it was logged and passed over, not fatal. Nothing shows the processes reached ready either; the logs may end before they did."
	}
	return Diagnosis{
		Cause:       Healthy,
		Title:       "no failure: " + why + onHost(s.nodeOf(i)),
		Evidence:    []Evidence{s.evidence(i)},
		Explanation: expl,
		Fix:         "Nothing to fix in these logs. If something still fails, diagnose the logs of the moment it fails (docker logs --since <time> <container>).",
	}
}
