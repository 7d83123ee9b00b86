package serve

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/termtext"
	"github.com/rayform/rayform/resources/stepenv"
)

// Progress lines of vLLM's startup (reference §3.6).
var (
	weightsRE  = regexp.MustCompile(`Loading (\w+) checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)`)
	graphsRE   = regexp.MustCompile(`(Capturing CUDA graphs[^:]*):\s*(\d+)%\|[^|]*\|\s*(\d+)/(\d+)`)
	vllmPrefix = regexp.MustCompile(`^(?:\([^)]*\)\s*)*(?:(?:INFO|WARNING|ERROR|DEBUG)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s*|INFO:\s+)?`)
)

// serveMilestones are the startup lines shown as they are, in order of
// appearance.
var serveMilestones = []string{
	"Starting to load model",
	"Loading weights took",
	"Model loading took",
	"Available KV cache memory",
	"GPU KV cache size",
	"Graph capturing finished",
	"init engine",
	"Starting vLLM API server",
	"Application startup complete.",
}

// serveFatal are lines after which vLLM never becomes ready.
var serveFatal = []string{
	"Engine core initialization failed",
	"EngineCore failed to start",
	"EngineDeadError",
}

// serveProgress turns vLLM's log into progress lines: a weight-loading bar,
// CUDA graph capture, milestones; it notes readiness and fatal lines.
// Known-harmless lines — c10d's first refused connection (the master is not
// listening yet; torch prints a garbage IPv6 address in it) and every rank's
// repeat of a milestone — are held back and shown only if the start fails.
// Bars complete before the milestone that ends them.
type serveProgress struct {
	progress func(string)
	throttle stepenv.Throttle
	buf      []byte
	seen     map[string]bool
	held     []string
	// bars maps a bar's phase to its last state, for completing it.
	bars  map[string]barState
	up    bool
	fatal string
}

// barState is the last line seen of one progress bar.
type barState struct {
	total int
	done  bool // 100% shown
}

func newServeProgress(progress func(string), t stepenv.Throttle) *serveProgress {
	return &serveProgress{progress: progress, throttle: t, seen: map[string]bool{}, bars: map[string]barState{}}
}

// failed shows the lines held back, once: the start failed, so they may
// matter.
func (p *serveProgress) failed() {
	for _, l := range p.held {
		p.progress(l)
	}
	p.held = nil
}

// barLine shows one state of a bar unless the bar already completed.
func (p *serveProgress) barLine(phase, label string, n, total, pct int) {
	st := p.bars[phase]
	if st.done {
		return
	}
	final := n == total
	p.bars[phase] = barState{total: total, done: final}
	if p.throttle.Allow(phase, final) {
		p.progress(fmt.Sprintf("%s %d/%d %s %d%%", label, n, total, bar(pct), pct))
	}
}

// completeBars shows 100% for the bars of phases a milestone ends (another
// rank's line can reach the log before this rank's last bar).
func (p *serveProgress) completeBars(match func(phase string) bool, label func(phase string) string) {
	for _, phase := range slices.Sorted(maps.Keys(p.bars)) {
		st := p.bars[phase]
		if !st.done && match(phase) {
			p.bars[phase] = barState{total: st.total, done: true}
			p.progress(fmt.Sprintf("%s %d/%d %s 100%%", label(phase), st.total, st.total, bar(100)))
		}
	}
}

// feed consumes more log bytes; an incomplete last line waits for the rest.
func (p *serveProgress) feed(b []byte) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexAny(p.buf, "\r\n")
		if i < 0 {
			return
		}
		// The lines shown are the log's: printed without terminal
		// control sequences (termtext).
		line := termtext.Plain(p.buf[:i])
		p.buf = p.buf[i+1:]
		p.line(strings.TrimSpace(string(line)))
	}
}

func (p *serveProgress) line(l string) {
	if l == "" {
		return
	}
	if m := weightsRE.FindStringSubmatch(l); m != nil {
		pct, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		total, _ := strconv.Atoi(m[4])
		p.barLine("weights", "Loading weights: shards", n, total, pct)
		return
	}
	if m := graphsRE.FindStringSubmatch(l); m != nil {
		pct, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		total, _ := strconv.Atoi(m[4])
		p.barLine(m[1], m[1]+":", n, total, pct)
		return
	}
	body := vllmPrefix.ReplaceAllString(l, "")
	for _, f := range serveFatal {
		if strings.Contains(body, f) && p.fatal == "" {
			p.fatal = body
			return
		}
	}
	if strings.Contains(body, "[c10d]") && strings.Contains(body, "failed to connect") {
		if !p.seen["c10d"] {
			p.seen["c10d"] = true
			p.held = append(p.held, "warning: "+body)
		}
		return
	}
	for _, m := range serveMilestones {
		if strings.Contains(body, m) {
			switch m {
			case "Loading weights took", "Model loading took":
				p.completeBars(func(ph string) bool { return ph == "weights" }, func(string) string { return "Loading weights: shards" })
			case "Graph capturing finished":
				p.completeBars(func(ph string) bool { return ph != "weights" }, func(ph string) string { return ph + ":" })
			}
			if !p.seen[m] {
				p.seen[m] = true
				p.progress(body)
			} else if !p.seen[body] {
				// Another rank's copy of a milestone already shown.
				p.seen[body] = true
				p.held = append(p.held, body)
			}
			if m == "Application startup complete." {
				p.up = true
			}
			return
		}
	}
}

// bar renders pct as a 20-cell bar: "[====>               ]".
func bar(pct int) string {
	const width = 20
	pct = min(max(pct, 0), 100)
	full := pct * width / 100
	s := strings.Repeat("=", full)
	if full < width {
		s += ">" + strings.Repeat(" ", width-full-1)
	}
	return "[" + s + "]"
}
