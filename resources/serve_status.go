package resources

import (
	"bufio"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/observe"
)

// StatusProbes adds to spec what status shows beyond what plan reads, in
// the same probe: each serve's /metrics (sent only to the serve's own
// process, as its /health is) and the start time of its process (its pid
// file's mtime, on the head).
func StatusProbes(spec *observe.Spec, cfg *Config, project string) {
	for _, sv := range sortedServes(cfg) {
		rc := cfg.RayClusters[sv.Cluster]
		if rc == nil {
			continue
		}
		hs, ok := spec.Hosts[rc.Head]
		if !ok {
			continue
		}
		container := ContainerName(rc)
		hs.HTTP = append(hs.HTTP, observe.HTTPProbe{URL: ServeURL(sv.Port, "/metrics"), Owner: container})
		serve := ServeSpec{Name: sv.Name, Container: container, Node: rc.Head}
		hs.Files = appendUnique(hs.Files, serve.HostPidPath(project))
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

// parseVLLMMetrics reads Prometheus text: each of vLLM's metrics that
// status shows, summed over its labels.
func parseVLLMMetrics(body string) *VLLMMetrics {
	m := &VLLMMetrics{}
	found := false
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
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
		}
		if into != nil {
			*into += v
			found = true
		}
	}
	if !found {
		return nil
	}
	return m
}
