package serve

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/hostplan"
)

// statusProbes adds to spec what status shows beyond what plan reads, in
// the same probe: each serve's /metrics (sent only to the serve's own
// process, as its /health is) and the start time of its process (its pid
// file's mtime, on the head).
func statusProbes(spec *observe.Spec, cfg *Blocks, project string) {
	for _, sv := range sortedServes(cfg) {
		rc := cfg.RayClusters[sv.Cluster]
		if rc == nil {
			continue
		}
		hs, ok := spec.Hosts[rc.Head]
		if !ok {
			continue
		}
		container := cluster.ContainerName(rc)
		hs.HTTP = append(hs.HTTP, observe.HTTPProbe{URL: ServeURL(sv.Port, "/metrics"), Owner: container})
		serve := ServeSpec{Name: sv.Name, Container: container, Node: rc.Head}
		hs.Files = hostplan.AppendUnique(hs.Files, serve.HostPidPath(project))
		spec.Hosts[rc.Head] = hs
	}
}

// ServeUptime is how long the serve's process has run, from its pid
// file's mtime and the head's clock; 0 when unknown.
func ServeUptime(hf *observe.HostFacts, spec ServeSpec, project string) time.Duration {
	if hf == nil || hf.Clock.IsZero() {
		return 0
	}
	f := hf.Files[spec.HostPidPath(project)]
	if !f.Exists || f.ModTime.After(hf.Clock) {
		return 0
	}
	return hf.Clock.Sub(f.ModTime)
}

// VLLMMetrics are vLLM's /metrics counters and gauges, summed over their
// labels.
type VLLMMetrics struct {
	RequestsFinished float64 `json:"requests_finished"`
	RequestsRunning  float64 `json:"requests_running"`
	RequestsWaiting  float64 `json:"requests_waiting"`
	PromptTokens     float64 `json:"prompt_tokens"`
	GenerationTokens float64 `json:"generation_tokens"`
	// TokensPerSecond is generation tokens over the uptime: the average
	// since the serve started (0 when the uptime is unknown).
	TokensPerSecond float64 `json:"tokens_per_second_avg"`
	// KVCacheUsage is vLLM's vllm:kv_cache_usage_perc, the share of the
	// KV cache's blocks in use (1 is full), of the fullest engine (a
	// gauge per engine: not summed); nil when vLLM did not report it.
	KVCacheUsage *float64 `json:"kv_cache_usage,omitempty"`
	// Notes say what of /metrics was left out, and why.
	Notes []string `json:"notes,omitempty"`
}

// ServeMetrics reads vLLM's /metrics on the serve's port, as the head's
// probe got it (nil when it did not answer, or named none of vLLM's
// metrics), with the average token rate over uptime.
func ServeMetrics(hf *observe.HostFacts, port int, uptime time.Duration) *VLLMMetrics {
	if hf == nil {
		return nil
	}
	r, ok := hf.HTTP[ServeURL(port, "/metrics")]
	if !ok || r.Status != 200 {
		return nil
	}
	m := parseVLLMMetrics(r.Body)
	if m != nil && uptime >= time.Second {
		m.TokensPerSecond = m.GenerationTokens / uptime.Seconds()
	}
	return m
}

// metricsLineMax is the longest line of /metrics parseVLLMMetrics reads:
// a longer one (vLLM writes lines of some hundred bytes) is skipped, with
// a note. The whole body is bounded by the probe (observe.HTTPBodyMax).
const metricsLineMax = 64 << 10

// parseVLLMMetrics reads Prometheus text: each of vLLM's metrics that
// status shows, summed over its labels. A sample that is not a finite
// number (NaN, ±Inf), a sum that is not one, and a line longer than
// metricsLineMax are left out, each with a note (Notes), so that the
// report has numbers only (JSON has no NaN) and says what it lacks.
func parseVLLMMetrics(body string) *VLLMMetrics {
	m := &VLLMMetrics{}
	found := false
	long := 0
	noted := map[string]bool{}
	note := func(n string) {
		if !noted[n] {
			noted[n] = true
			m.Notes = append(m.Notes, n)
		}
	}
	for line := range strings.SplitSeq(body, "\n") {
		if len(line) > metricsLineMax {
			long++
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if ok {
			_, rest, ok = strings.Cut(rest, "}")
		} else {
			name, rest, ok = strings.Cut(line, " ")
		}
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		var into *float64
		switch name {
		case "vllm:request_success_total":
			into = &m.RequestsFinished
		case "vllm:num_requests_running":
			into = &m.RequestsRunning
		case "vllm:num_requests_waiting":
			into = &m.RequestsWaiting
		case "vllm:prompt_tokens_total":
			into = &m.PromptTokens
		case "vllm:generation_tokens_total":
			into = &m.GenerationTokens
		case "vllm:kv_cache_usage_perc":
			found = true
			if !finite(v) {
				note(fmt.Sprintf("%s: a sample is %s: left out", name, strconv.FormatFloat(v, 'g', -1, 64)))
			} else if m.KVCacheUsage == nil || v > *m.KVCacheUsage {
				m.KVCacheUsage = &v
			}
		}
		if into == nil {
			continue
		}
		found = true
		if !finite(v) {
			note(fmt.Sprintf("%s: a sample is %s: left out", name, strconv.FormatFloat(v, 'g', -1, 64)))
			continue
		}
		if *into += v; !finite(*into) {
			note(name + ": the sum is not a finite number: left out")
			*into = 0
		}
	}
	if long > 0 {
		note(fmt.Sprintf("%d line%s of /metrics longer than %d bytes skipped", long, plural(long), metricsLineMax))
	}
	if !found {
		return nil
	}
	return m
}

// finite reports whether f is a number JSON can carry (not NaN or ±Inf).
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ServeStatus is what status shows of a serve.
type ServeStatus struct {
	Address  string `json:"address"`
	Node     string `json:"node"`
	Endpoint string `json:"endpoint,omitempty"`
	// Health is one of the Health constants.
	Health       string   `json:"health"`
	HealthDetail string   `json:"health_detail,omitempty"`
	Models       []string `json:"models,omitempty"`
	// UptimeSeconds is how long the serve process has run (0: unknown).
	UptimeSeconds int64        `json:"uptime_seconds,omitempty"`
	Metrics       *VLLMMetrics `json:"metrics,omitempty"`
}

// serveStatus reads a serve from the observation: its health from its
// record and its own port's answers, judged as plan judges them
// (JudgeServe), its uptime and vLLM's metrics.
func serveStatus(cfg *Blocks, facts *observe.Facts, project string, sv *VLLMServe) ServeStatus {
	rc := cfg.RayClusters[sv.Cluster]
	ss := ServeStatus{Address: sv.Addr, Endpoint: sv.Endpoint, Health: HealthDown}
	if rc == nil {
		ss.HealthDetail = "its cluster is not in the configuration"
		return ss
	}
	ss.Node = rc.Head
	hf := facts.Hosts[rc.Head]
	if hf == nil {
		ss.HealthDetail = "the head could not be observed"
		return ss
	}
	spec, err := ServeSpecFor(cfg, sv)
	if err != nil {
		ss.HealthDetail = err.Error()
		return ss
	}
	answer := ServeAnswer(hf, sv.Port)
	rec := ServeRecord(hf, sv.Name)
	h := JudgeServe(rec, answer, spec)
	ss.Health, ss.HealthDetail = h.State, h.Detail
	if f, ok := FailedStartOf(hf, spec, project); ok && h.State == HealthDown && f.SpecHash == rec.SpecHash {
		// rayform's own start of it failed (and rayform stopped it).
		ss.Health, ss.HealthDetail = HealthFailed, "rayform's start at "+f.At.Format(time.DateTime)+" failed: "+f.Cause+"; rayform logs "+sv.Addr+" shows its log"
		return ss
	}
	for _, m := range answer.Models {
		ss.Models = append(ss.Models, m.ID)
	}
	if h.State == HealthDown {
		return ss
	}
	uptime := ServeUptime(hf, spec, project)
	ss.UptimeSeconds = int64(uptime / time.Second)
	if h.State == HealthOK {
		ss.Metrics = ServeMetrics(hf, sv.Port, uptime)
	}
	return ss
}

// render prints the serve's health, model, uptime and metrics.
func (s ServeStatus) render(w io.Writer) {
	fmt.Fprintf(w, "\nServe %s on %s:\n", s.Address, hostplan.FirstNonEmpty(s.Node, "-"))
	fmt.Fprintf(w, "  health    %s (%s)\n", s.Health, s.HealthDetail)
	if len(s.Models) > 0 {
		fmt.Fprintf(w, "  model     %s\n", strings.Join(s.Models, ", "))
	}
	if s.UptimeSeconds > 0 {
		fmt.Fprintf(w, "  uptime    %s\n", time.Duration(s.UptimeSeconds)*time.Second)
	}
	if m := s.Metrics; m != nil {
		fmt.Fprintf(w, "  requests  %g finished, %g running, %g waiting\n", m.RequestsFinished, m.RequestsRunning, m.RequestsWaiting)
		fmt.Fprintf(w, "  tokens    %g prompt, %g generated (%.1f tokens/s on average since start)\n", m.PromptTokens, m.GenerationTokens, m.TokensPerSecond)
		if m.KVCacheUsage != nil {
			fmt.Fprintf(w, "  kv cache  %.1f%% used\n", *m.KVCacheUsage*100)
		}
		for _, n := range m.Notes {
			fmt.Fprintf(w, "  note      %s\n", n)
		}
	}
	if s.Endpoint != "" {
		fmt.Fprintf(w, "  endpoint  %s\n", s.Endpoint)
	}
}
