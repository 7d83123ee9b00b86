package diagnose

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/rayform/rayform/resources/clitables"
	"github.com/rayform/rayform/resources/vllmcli"
)

// This file holds the rules of the serve domain: vLLM's own command line,
// ports, model/parallelism fit, the engine core, the process's lifetime.

// ---- engine core failed, nothing more specific -----------------------------

func matchEngineCore(b string) bool {
	return containsAny(b, "Engine core initialization failed", "EngineCore failed to start", "EngineDeadError", "EngineCore encountered an issue")
}

// maxEngineContext is how many meaningful lines before the wrapper error an
// EngineCore diagnosis shows.
const maxEngineContext = 8

func buildEngineCore(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	var before []int
	lo, _ := s.logSpan(i)
	for j := lo; j < i; j++ {
		if !matchEngineCore(s.lines[j].body) {
			before = append(before, j)
		}
	}
	ev := []Evidence{s.evidence(i)}
	for _, j := range s.tail(before, maxEngineContext) {
		ev = append(ev, s.evidence(j))
	}
	host := s.host(i)
	return Diagnosis{
		Title:    "vLLM's engine core failed to start" + onHost(host) + "; no known root cause in the logs",
		Evidence: ev,
		Explanation: "\"Engine core initialization failed\" is vLLM's wrapper: the cause is printed before it, by the engine core or a Ray worker (possibly in another host's log). " +
			"The lines that say something just before it are shown; none matched a failure rayform knows.",
		Fix: "Read the log above the wrapper error in full (`docker logs` of the vLLM container" + onHost(host) + ") and the Ray workers' logs on the other nodes; the first exception there is the cause.",
	}, true
}

// ---- tensor_parallel_size does not divide the attention heads -----------------

var tpHeadsRE = regexp.MustCompile(`Total number of attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)`)

func matchTPHeads(b string) bool {
	return strings.Contains(b, "must be divisible by tensor parallel size") && tpHeadsRE.MatchString(b)
}

func buildTPHeads(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	m := tpHeadsRE.FindStringSubmatch(s.lines[i].body)
	heads, _ := strconv.Atoi(m[1])
	tp, _ := strconv.Atoi(m[2])
	host := s.nodeOf(i)
	c := s.ctx
	var ok []string
	for d := 1; d <= heads && d <= 64; d++ {
		if heads%d == 0 {
			ok = append(ok, strconv.Itoa(d))
		}
	}
	// Keep all tp GPUs: the largest TP that divides both, the rest as
	// pipeline stages (layers need not split evenly).
	best := 1
	for d := tp - 1; d > 1; d-- {
		if heads%d == 0 && tp%d == 0 {
			best = d
			break
		}
	}
	fix := fmt.Sprintf("Set tensor_parallel_size on %s to a divisor of %d (%s); to keep all %d GPUs, split the rest by layers: tensor_parallel_size = %d, pipeline_parallel_size = %d (pipeline stages need not divide the layers evenly).",
		c.serve(), heads, strings.Join(ok, ", "), tp, best, tp/best)
	return Diagnosis{
		Title:       fmt.Sprintf("tensor_parallel_size %d does not divide the model's %d attention heads%s", tp, heads, onHost(host)),
		Evidence:    []Evidence{s.evidence(i)},
		Explanation: fmt.Sprintf("vLLM splits the attention heads evenly across the tensor-parallel ranks and refuses to start otherwise: %d %% %d = %d. Nothing was loaded.", heads, tp, heads%tp),
		Fix:         fix,
	}, true
}

// matchAny selects every meaningful line: for rules decided by the context
// (rayform's own timeout, a process found gone) rather than by one line.
func matchAny(string) bool { return true }

// ---- vLLM's argument parser -------------------------------------------------

var (
	// argparse's error line: "vllm: error: unrecognized arguments: --x 1",
	// "vllm serve: error: ambiguous option: ...", "... invalid int value".
	argErrorRE  = regexp.MustCompile(`^(vllm(?: serve)?|api_server\.py): error: (.*)$`)
	unrecArgsRE = regexp.MustCompile(`^unrecognized arguments: (.*)$`)
	// "vLLM API server version 0.11.2" (printed only when parsing succeeded,
	// e.g. by an earlier run in the same log).
	vllmVersionRE = regexp.MustCompile(`vLLM API server version (\S+)`)
)

// VersionAtLeast compares dotted release numbers ("0.10.1" >= "0.10.0");
// a suffix (".post1", "rc1", "+cu128") is ignored.
func VersionAtLeast(v, min string) bool {
	parse := func(s string) []int {
		var out []int
		for _, p := range strings.Split(strings.TrimPrefix(s, "v"), ".") {
			n := 0
			k := 0
			for ; k < len(p) && p[k] >= '0' && p[k] <= '9'; k++ {
				n = n*10 + int(p[k]-'0')
			}
			if k == 0 {
				break
			}
			out = append(out, n)
			if k < len(p) {
				break
			}
		}
		return out
	}
	a, b := parse(v), parse(min)
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x > y
		}
	}
	return true
}

// removedOption is a `vllm serve` option that later vLLM releases no
// longer accept, with what replaces it.
type removedOption struct {
	flag        string
	absentSince string // the first release seen refusing it (not always the removal)
	instead     string
	source      string
}

// removedOptions are the removals users hit, each with its evidence.
var removedOptions = []removedOption{
	{"--enable-reasoning", "0.10.0", "drop it: --reasoning-parser alone turns reasoning on", "https://github.com/vllm-project/vllm/issues/18538"},
	{"--task", "0.13.0", "--runner pooling --convert embed (or classify, reward) for a pooling model; a generative model needs neither", "https://github.com/flagos-ai/vllm-plugin-FL/issues/127"},
	{"--swap-space", "0.18.0", "drop it (there is no CPU swap space to size any more)", "https://github.com/unslothai/unsloth-zoo/issues/1210"},
}

// lookupRemoved returns the removal that flag names, if any.
func lookupRemoved(flag string) (removedOption, bool) {
	name, _, _ := strings.Cut(flag, "=")
	name = strings.ReplaceAll(name, "_", "-")
	for _, r := range removedOptions {
		if name == r.flag {
			return r, true
		}
	}
	return removedOption{}, false
}

func matchVLLMArgs(b string) bool { return argErrorRE.MatchString(b) }

func buildVLLMArgs(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[len(hits)-1]
	m := argErrorRE.FindStringSubmatch(s.lines[i].body)
	host := s.nodeOf(i)
	c := s.ctx
	version := s.vllmVersion(i)
	in := "the vLLM in " + c.image()
	if version != "" {
		in = "vLLM " + version + " in " + c.image()
	}
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}}
	u := unrecArgsRE.FindStringSubmatch(m[2])
	if u == nil {
		d.Title = in + onHost(host) + " refused the serve command line: " + m[2]
		d.Explanation = "vLLM's argument parser stops before anything starts; the message names the option and the value it could not take."
		d.Fix = "Correct that option in extra_args on " + c.serve() + " (check it against `vllm serve --help` in " + c.image() + ")."
		return d, true
	}
	var flags []string
	for _, w := range strings.Fields(u[1]) {
		if strings.HasPrefix(w, "-") {
			flags = append(flags, w)
		}
	}
	what := u[1]
	if len(flags) > 0 {
		what = strings.Join(flags, ", ")
	}
	d.Title = in + onHost(host) + " does not know " + what
	why := []string{"argparse refused \"" + redact(u[1]) + "\": those words match no option of this vLLM's `vllm serve` (removed or renamed options fail like this after an image upgrade, new ones on an older image; a value after a switch that takes none lands here too)."}
	why = append(why, newerVLLMWhy(version, flags)...)
	r := removalsOf(version, flags)
	d.Explanation = strings.Join(append(why, r.why...), "\n")
	switch {
	case len(r.removed) == 0:
		d.Fix = "Remove or rename " + what + " in extra_args on " + c.serve() + ", or use an image whose vLLM has it (`docker run --rm " + c.imageRef() + " vllm serve --help=all`)."
	case r.unsure:
		d.Fix = "Check the image's vLLM with `docker run --rm " + c.imageRef() + " vllm --version`. If it is at or past the removal, in extra_args on " + c.serve() +
			" (by hand: the vllm serve command line): " + strings.Join(r.instead, "; ") + ". If it is older than the option, use a newer image."
	default:
		d.Title = in + onHost(host) + " no longer accepts " + strings.Join(r.removed, ", ") + " (removed from vLLM)"
		if len(r.removed) < len(flags) {
			d.Title = in + onHost(host) + " does not know " + what + "; " + strings.Join(r.removed, ", ") + " was removed from vLLM"
		}
		d.Fix = "In extra_args on " + c.serve() + " (by hand: the vllm serve command line): " + strings.Join(r.instead, "; ") + "."
	}
	return d, true
}

// vllmVersion is the image's vLLM version: as rayform knows it, else as
// line i's log prints it, else "".
func (s *scan) vllmVersion(i int) string {
	if s.ctx.VLLMVersion != "" {
		return s.ctx.VLLMVersion
	}
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		if v := vllmVersionRE.FindStringSubmatch(s.lines[j].body); v != nil {
			return v[1]
		}
	}
	return ""
}

// newerVLLMWhy names the refused flags that the vLLM rayform targets has
// and the image's release does not. A local version segment labels a
// build ("0.17.1+cpu" is 0.17.1's command line): releases are compared.
func newerVLLMWhy(version string, flags []string) []string {
	if version == "" || clitables.PublicVersion(version) == vllmcli.Version {
		return nil
	}
	var known []string
	opts := vllmcli.ServeOptions()
	for _, f := range flags {
		if r := opts.Resolve(vllmcli.Normalize(f)); r.Option != nil {
			known = append(known, f)
		}
	}
	if len(known) == 0 {
		return nil
	}
	return []string{"vLLM " + vllmcli.Version + " has " + strings.Join(known, ", ") + "; the image's " + version + " does not."}
}

// removals is what the refused flags say of options later vLLM
// releases removed: the flags, what to use instead, why, and whether it is
// unsure (no version known: an image older than the option refuses it
// too).
type removals struct {
	removed, instead, why []string
	unsure                bool
}

// removalsOf finds the removed options among flags: certain when
// version is at or past the first release seen refusing one; a version
// before it is not the reason.
func removalsOf(version string, flags []string) removals {
	var out removals
	for _, f := range flags {
		r, ok := lookupRemoved(f)
		if !ok {
			continue
		}
		switch {
		case version == "":
			out.unsure = true
			out.why = append(out.why, r.flag+" was removed from vLLM (releases from "+r.absentSince+" on refuse it: "+r.source+"); an image older than the option refuses it as well, and this log does not show the version.")
		case VersionAtLeast(version, r.absentSince):
			out.why = append(out.why, r.flag+" was removed from vLLM: releases from "+r.absentSince+" on refuse it ("+r.source+").")
		default:
			continue // older than the removal: not the reason
		}
		out.removed = append(out.removed, r.flag)
		out.instead = append(out.instead, r.flag+": "+r.instead)
	}
	return out
}

// ---- a port already taken ---------------------------------------------------

var (
	bindAddrRE = regexp.MustCompile(`bind on address \('([^']*)', (\d+)\)`)
	bindToRE   = regexp.MustCompile(`[Ff]ailed to bind to address (\S+):(\d+)`)
	rayAtRE    = regexp.MustCompile(`Ray is trying to start at (\S+?):(\d+), but is already running at (\S+)\.`)
)

func matchAddrInUse(b string) bool {
	return containsAny(b, "Address already in use", "address already in use", "EADDRINUSE", "Failed to bind to address", "but is already running at")
}

func buildAddrInUse(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	b := s.lines[i].body
	host := s.nodeOf(i)
	c := s.ctx
	port, what := 0, ""
	switch {
	case bindAddrRE.MatchString(b):
		port, _ = strconv.Atoi(bindAddrRE.FindStringSubmatch(b)[2])
		what = "vLLM's API server"
	case bindToRE.MatchString(b):
		port, _ = strconv.Atoi(bindToRE.FindStringSubmatch(b)[2])
		what = "Ray's GCS"
	case rayAtRE.MatchString(b):
		m := rayAtRE.FindStringSubmatch(b)
		port, _ = strconv.Atoi(m[2])
		what = "Ray (already running at " + m[3] + ")"
	case strings.Contains(b, "The server socket has failed to listen"):
		what = "the c10d store (torch.distributed's master port)"
	case c.ServePort > 0 && strings.Contains(b, "[Errno 98]"):
		// vLLM binds its serve socket first thing; a bare errno 98 from
		// the API server is its port.
		port, what = c.ServePort, "vLLM's API server"
	}
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}}
	title := "a port is already in use"
	if port > 0 {
		title = "port " + strconv.Itoa(port) + " is already in use"
	}
	d.Title = title + onHost(host)
	holder := c.PortHolders[port]
	var why []string
	on := ""
	if port > 0 {
		on = " on port " + strconv.Itoa(port)
	}
	why = append(why, orDefault(what, "The process")+" could not listen"+on+": another process holds it.")
	if holder != "" {
		why = append(why, "It is held by "+holder+".")
	} else if port > 0 {
		why = append(why, "Find the holder with: ss -ltnp 'sport = :"+strconv.Itoa(port)+"'")
	}
	d.Explanation = strings.Join(why, " ")
	switch {
	case what == "vLLM's API server":
		d.Fix = "Stop what holds the port on " + orDefault(host, "the head") + " (an earlier vllm serve, another server), or choose another port on " + c.serve() + "."
	case strings.HasPrefix(what, "Ray"):
		d.Fix = "Stop the other Ray (`ray stop` in that container, or remove a stale container) on " + orDefault(host, "the head") + ", or change port on " + c.cluster() + "."
	default:
		d.Fix = "Stop the process that holds the port on " + orDefault(host, "the host") + ", then re-run rayform apply."
	}
	return d, true
}

// ---- serve stopped from outside ---------------------------------------------

// matchKilled matches vLLM's SIGTERM handler (raise KeyboardInterrupt
// ("terminated")); a process found gone with no error line at all was
// killed (SIGKILL prints nothing).
func matchKilled(b string) bool { return true }

func buildKilled(s *scan, hits []int) (Diagnosis, bool) {
	if s.ctx.ReadyTimeout > 0 {
		// The process was still running when rayform gave up: a stop that
		// followed is rayform's, not the cause.
		return Diagnosis{}, false
	}
	for _, i := range hits {
		if strings.TrimSpace(s.lines[i].body) == "KeyboardInterrupt: terminated" {
			host := s.nodeOf(i)
			ev := []Evidence{s.evidence(i)}
			if p := s.lastProgress(i); p >= 0 {
				ev = append(ev, s.evidence(p))
			}
			return Diagnosis{
				Title:    "vllm serve" + onHost(host) + " was stopped from outside (SIGTERM) while starting",
				Evidence: ev,
				Explanation: "vLLM's API server turns SIGTERM into KeyboardInterrupt(\"terminated\"): something outside vLLM stopped it — `docker stop`/`docker restart` of the container, a second rayform apply or destroy, " +
					"or a person. Nothing in vLLM failed.",
				Fix: "Find who stopped it on " + orDefault(host, "the head") + " (`docker events --since 1h`, another rayform run on this state), then re-run rayform apply.",
			}, true
		}
	}
	if !s.ctx.ProcessExited {
		return Diagnosis{}, false
	}
	for _, i := range hits {
		if looksLikeError(s.lines[i].body) {
			return Diagnosis{}, false
		}
	}
	last := hits[len(hits)-1]
	host := s.host(last)
	return Diagnosis{
		Title:    "vllm serve" + onHost(host) + " disappeared without an error: it was killed (SIGKILL)",
		Evidence: []Evidence{s.evidence(last)},
		Explanation: "The process is gone and its log ends without an exception: a SIGKILL leaves no line. The kernel's OOM killer (host RAM), `docker kill`/`docker rm -f`, " +
			"or `kill -9` did it. The last line it printed is shown.",
		Fix: "On " + orDefault(host, "the head") + ": `dmesg | grep -i -e oom -e 'killed process'` for the OOM killer, `docker events --since 1h` for docker; then re-run rayform apply.",
	}, true
}

// errorWordRE finds lines that report a failure.
var errorWordRE = regexp.MustCompile(`Error\b|Exception\b|\bERROR\b|Traceback|\bFAILED\b|failed|Killed`)

func looksLikeError(b string) bool { return errorWordRE.MatchString(b) }

// ---- ready_timeout ----------------------------------------------------------

func buildReadyTimeout(s *scan, hits []int) (Diagnosis, bool) {
	c := s.ctx
	if c.ReadyTimeout <= 0 {
		return Diagnosis{}, false
	}
	last := hits[len(hits)-1]
	host := s.host(last)
	var ev []Evidence
	p := -1
	for j := len(s.lines) - 1; j >= 0 && p < 0; j-- {
		if isProgress(s.lines[j].body) {
			p = j
		}
	}
	if p >= 0 {
		ev = append(ev, s.evidence(p))
	}
	if p != last {
		ev = append(ev, s.evidence(last))
	}
	stage := "no progress line"
	if p >= 0 {
		stage = "its last progress: " + strings.TrimSpace(s.lines[p].body)
	}
	return Diagnosis{
		Title:    fmt.Sprintf("vllm serve%s was still starting when ready_timeout (%s) ran out", onHost(host), c.ReadyTimeout),
		Evidence: ev,
		Explanation: "No error: vLLM was still working (" + stage + "). Downloading and loading large weights, torch.compile and CUDA graph capture can take longer than ready_timeout, " +
			"most of all on the first run (empty Hugging Face cache) or on slow storage. rayform stopped waiting.",
		Fix: "Raise ready_timeout on " + c.serve() + " (e.g. \"30m\" for a first download of a large model), or pre-download the weights into a volume; re-run rayform apply.",
	}, true
}

// lastProgress returns the last progress-bar line of line i's log at or
// before i (-1 if none): progress bars are noise for matching, but the last
// one says how far a startup got.
func (s *scan) lastProgress(i int) int {
	if i < 0 {
		return -1
	}
	lo, _ := s.logSpan(i)
	for j := i; j >= lo; j-- {
		if isProgress(s.lines[j].body) {
			return j
		}
	}
	return -1
}
