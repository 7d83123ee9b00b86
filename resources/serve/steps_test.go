package serve_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/resources/internal/steplab"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/stepenv"
)

func TestServeProgress(t *testing.T) {
	// The clock stands still: only a new phase or a final line passes.
	now := func() time.Time { return time.Date(2026, 4, 8, 23, 30, 0, 0, time.UTC) }
	var got []string
	p := serve.NewServeProgress(func(s string) { got = append(got, s) }, stepenv.NewThrottle(now, time.Hour))
	for _, c := range steplab.QwenStartupLog() {
		p.Feed(c)
	}
	want := []string{
		"Starting to load model Qwen/Qwen3.5-122B-A10B-FP8...",
		"Loading weights: shards 0/39 [>                   ] 0%",
		"Loading weights: shards 39/39 [====================] 100%",
		"Loading weights took 161.20 seconds",
		"Model loading took 59.3125 GiB memory and 162.004000 seconds",
		"Available KV cache memory: 31.20 GiB",
		"GPU KV cache size: 340,784 tokens",
		"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 0/67 [>                   ] 0%",
		"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 67/67 [====================] 100%",
		"Capturing CUDA graphs (decode, FULL): 35/35 [====================] 100%",
		"Graph capturing finished in 4 secs, took 0.49 GiB",
		"Starting vLLM API server 0 on http://0.0.0.0:8000",
		"Application startup complete.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !p.Up() || p.Fatal() != "" {
		t.Errorf("up = %v, fatal = %q", p.Up(), p.Fatal())
	}
	if b := serve.Bar(21); b != "[====>               ]" {
		t.Errorf("bar(21) = %q", b)
	}
}

// The harmless lines of a successful start stay out of the progress: c10d's
// first refused try (with torch's garbage IPv6 address, the same words as
// the seeds' failure) and every other rank's copy of a milestone; a bar
// completes before the milestone that ends it, even when another rank's
// line reaches the log first. When the start fails, the held lines show.
func TestServeProgressHoldsNoiseAndOrdersBars(t *testing.T) {
	var got []string
	p := serve.NewServeProgress(func(s string) { got = append(got, s) }, stepenv.NewThrottle(func() time.Time { return time.Date(2026, 4, 8, 23, 30, 0, 0, time.UTC) }, time.Hour))
	log := "" +
		"(RayWorkerWrapper pid=22, ip=192.168.200.13) [W1130 01:31:16.913963427 socket.cpp:764] [c10d] The client socket has failed to connect to [d090:dfc1::f00:0:f595:0]:18126 (errno: 111 - Connection refused).\n" +
		"Loading safetensors checkpoint shards:   0% Completed | 0/14 [00:00<?, ?it/s]\r" +
		"Loading safetensors checkpoint shards:  93% Completed | 13/14 [00:52<00:04,  4.02s/it]\n" +
		"(RayWorkerWrapper pid=22, ip=192.168.200.13) INFO 11-30 01:32:10 [default_loader.py:314] Loading weights took 55.10 seconds\n" +
		"Loading safetensors checkpoint shards: 100% Completed | 14/14 [00:56<00:00,  4.01s/it]\n" +
		"INFO 11-30 01:32:11 [default_loader.py:314] Loading weights took 56.20 seconds\n" +
		"(RayWorkerWrapper pid=22, ip=192.168.200.13) INFO 11-30 01:32:11 [gpu_model_runner.py:3420] Model loading took 29.6562 GiB memory and 56.120000 seconds\n" +
		"INFO 11-30 01:32:12 [gpu_model_runner.py:3420] Model loading took 29.6562 GiB memory and 57.004000 seconds\n"
	p.Feed([]byte(log))
	want := []string{
		"Loading weights: shards 0/14 [>                   ] 0%",
		"Loading weights: shards 14/14 [====================] 100%",
		"Loading weights took 55.10 seconds",
		"Model loading took 29.6562 GiB memory and 56.120000 seconds",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = nil
	p.Failed()
	wantHeld := []string{
		"warning: [W1130 01:31:16.913963427 socket.cpp:764] [c10d] The client socket has failed to connect to [d090:dfc1::f00:0:f595:0]:18126 (errno: 111 - Connection refused).",
		"Loading weights took 56.20 seconds",
		"Model loading took 29.6562 GiB memory and 57.004000 seconds",
	}
	if strings.Join(got, "\n") != strings.Join(wantHeld, "\n") {
		t.Errorf("held back lines after a failure:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantHeld, "\n"))
	}
}
