package hw

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// Timing keys and their defaults. Every simulated duration is one of these;
// the hardware file's "timing" object overrides the default and the
// environment variable SIMNODE_<KEY> (upper case) overrides both.
var timingDefaults = map[string]time.Duration{
	// vLLM
	"engine_init":   500 * time.Millisecond, // config resolution before workers start
	"weight_load":   10 * time.Second,       // whole checkpoint, spread over the shards
	"profile_run":   500 * time.Millisecond, // memory profiling after load
	"graph_capture": 4 * time.Second,        // CUDA graph capture
	// vLLM's PG_WAIT_TIMEOUT and the first wait interval (doubles each time).
	"placement_group_timeout":       1800 * time.Second,
	"placement_group_wait_interval": 10 * time.Second,
	// torch.distributed default init_process_group timeout.
	"c10d_timeout": 600 * time.Second,
	// Ray
	"gcs_connect_timeout": 5 * time.Second,  // one GcsClient connection attempt
	"heartbeat_period":    1 * time.Second,  // raylet -> GCS
	"heartbeat_timeout":   10 * time.Second, // GCS marks a silent node DEAD
	"gcs_reconnect":       60 * time.Second, // raylet gives up on a lost GCS
	"stop_grace":          16 * time.Second, // ray stop grace period default
}

// Timing resolves simulated durations.
type Timing struct {
	vals map[string]time.Duration
	// TokensPerSecond is the generation rate of the OpenAI server
	// (SIMNODE_TOKENS_PER_SECOND, hardware timing "tokens_per_second").
	TokensPerSecond float64
	// GCSRetries is how many GcsClient attempts `ray start` makes before
	// giving up (SIMNODE_GCS_RETRIES, default 3).
	GCSRetries int
}

// TimingKeys lists the duration keys in sorted order.
func TimingKeys() []string {
	keys := make([]string, 0, len(timingDefaults))
	for k := range timingDefaults {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// LoadTiming merges defaults, the hardware file (h may be nil) and env.
func LoadTiming(h *Hardware, env sim.Env) (*Timing, error) {
	t := &Timing{vals: make(map[string]time.Duration, len(timingDefaults)), TokensPerSecond: 30, GCSRetries: 3}
	for k, v := range timingDefaults {
		t.vals[k] = v
	}
	apply := func(src, k, v string) error {
		switch k {
		case "tokens_per_second":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				return fmt.Errorf("%s: tokens_per_second %q: want a positive number", src, v)
			}
			t.TokensPerSecond = f
			return nil
		case "gcs_retries":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("%s: gcs_retries %q: want a positive integer", src, v)
			}
			t.GCSRetries = n
			return nil
		}
		if _, ok := timingDefaults[k]; !ok {
			return fmt.Errorf("%s: unknown timing key %q", src, k)
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: timing %s: %w", src, k, err)
		}
		t.vals[k] = d
		return nil
	}
	if h != nil {
		keys := make([]string, 0, len(h.Timing))
		for k := range h.Timing {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := apply("hardware file", k, h.Timing[k]); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range append(TimingKeys(), "tokens_per_second", "gcs_retries") {
		name := "SIMNODE_" + strings.ToUpper(k)
		if v, ok := env.Lookup(name); ok && v != "" {
			if err := apply(name, k, v); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// DefaultTiming returns the defaults with env overrides applied, ignoring
// errors (used where no hardware file is available).
func DefaultTiming(env sim.Env) *Timing {
	t, err := LoadTiming(nil, env)
	if err != nil {
		t, _ = LoadTiming(nil, sim.Env{})
	}
	return t
}

// Get returns the duration for key (0 for an unknown key).
func (t *Timing) Get(key string) time.Duration { return t.vals[key] }

// Map returns every duration as strings, for passing to another process.
func (t *Timing) Map() map[string]string {
	m := make(map[string]string, len(t.vals)+2)
	for k, v := range t.vals {
		m[k] = v.String()
	}
	m["tokens_per_second"] = strconv.FormatFloat(t.TokensPerSecond, 'g', -1, 64)
	m["gcs_retries"] = strconv.Itoa(t.GCSRetries)
	return m
}

// TimingFromMap rebuilds a Timing from Map's output.
func TimingFromMap(m map[string]string) (*Timing, error) {
	h := &Hardware{Timing: m}
	return LoadTiming(h, sim.Env{})
}
