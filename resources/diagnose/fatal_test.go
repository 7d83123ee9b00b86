package diagnose

import (
	"strings"
	"testing"
)

// TestFatalErrorNamed: a failure no rule knows is named by the error that
// ended the process — its host, its component, its words and the fix it
// gives — never "no known failure pattern"; the wrapper errors after it
// rank under it. Each log's lines are verbatim from the named source.
func TestFatalErrorNamed(t *testing.T) {
	tests := []struct {
		name, host, log string
		want            []string // substrings of the rendered text
	}{
		{
			// Constructed around vLLM's own dtype check (vllm/platforms/cuda.py),
			// a message no rule or catalogue class claims.
			name: "dtype", host: "gpu1",
			log: "(EngineCore_DP0 pid=1544) ERROR 04-03 10:01:02 [core.py:387] EngineCore failed to start.\n" +
				"(EngineCore_DP0 pid=1544) ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100-SXM2-32GB GPU has compute capability 7.0. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.\n" +
				"(APIServer pid=1479) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n",
			want: []string{"vLLM's engine core on gpu1 stopped on: ValueError: Bfloat16 is only supported", "You can use float16 instead", "also in the logs (consequences): engine-core-failed", "Fix: Layer: vLLM. On gpu1, rerun vllm serve with VLLM_LOGGING_LEVEL=DEBUG"},
		},
		{
			// Constructed: the container runtime refusing a mount.
			name: "container runtime", host: "spark2",
			log:  "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error mounting \"/models\" to rootfs at \"/root/.cache/huggingface\": stat /models: no such file or directory: unknown.\n",
			want: []string{"the container runtime on spark2 stopped on", "stat /models: no such file or directory", "Fix: Layer: the container runtime (Docker and the NVIDIA container toolkit). On spark2: docker info"},
		},
		{
			// A raylet's glog FATAL line.
			name: "raylet fatal", host: "node2",
			log: "[2025-01-10 10:00:00,000 I 100 100] main.cc:180: Setting cluster ID to: 3f2a\n" +
				"F0110 10:00:01.000000 100 100 node_manager.cc:500] Check failed: status.ok() Failed to register the node: GCS returned Invalid: version mismatch\n",
			want: []string{"on node2 stopped on", "Check failed: status.ok()", "Fix: Layer: Ray. On the head, ray status"},
		},
		{
			// The only error is one that reports a failure elsewhere
			// (https://github.com/runpod-workers/worker-vllm/issues/43, the
			// lines after the prompt): still quoted, not "no known pattern".
			name: "consequence only", host: "pod1",
			log: "    answer = input(\n" +
				"EOFError: EOF when reading a line\n",
			want: []string{"the process on pod1 stopped on: EOFError: EOF when reading a line"},
		},
		{
			// The same lines as docker logs -t prints them (RFC 3339 stamps).
			name: "docker logs -t", host: "pod1",
			log: "2024-02-08T08:40:56.162176340Z     answer = input(\n" +
				"2024-02-08T08:40:56.162202300Z EOFError: EOF when reading a line\n",
			want: []string{"the process on pod1 stopped on: EOFError: EOF when reading a line"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(Input{Logs: []Log{{Host: tt.host, Source: "log", Text: []byte(tt.log)}}})
			out := d.Text()
			// A quoted error is a failure whose cause no rule knows: known
			// is false (-json says so), and the fix is the layer's next
			// diagnostic step, never a generic "correct that value".
			if !d.Failure || d.Known || strings.Contains(out, "no known failure pattern") || !strings.HasPrefix(d.Fix, "Layer: ") || strings.Contains(d.Fix, "orrect that value") {
				t.Fatalf("cause %s (known %v, failure %v):\n%s", d.Cause, d.Known, d.Failure, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestSilenceOnHealth: logs whose processes reach ready, or whose error
// line comes from another program's logger and is followed by normal
// progress, show no failure; an error after ready is one.
func TestSilenceOnHealth(t *testing.T) {
	// Lines of a vLLM 0.8 start (vllm-project/vllm issues) with an ERROR of
	// another logger early on.
	start := "INFO 04-03 10:00:00 [api_server.py:1034] vLLM API server version 0.8.3\n" +
		"ERROR:root:flash_attn is not installed, falling back\n" +
		"INFO 04-03 10:00:05 [config.py:689] This model supports multiple tasks: {'generate'}. Defaulting to 'generate'.\n" +
		"INFO 04-03 10:00:06 [core.py:58] Initializing a V1 LLM engine (v0.8.3) with config: model='Qwen/Qwen2.5-7B'\n" +
		"INFO 04-03 10:00:20 [loader.py:447] Loading weights took 3.12 seconds\n"
	ready := "INFO:     Started server process [1]\nINFO:     Waiting for application startup.\nINFO:     Application startup complete.\n"
	// vLLM's own line when the server is up (vllm-project/vllm PR 44106,
	// turn 4), where uvicorn's is not logged.
	starting := "(APIServer pid=1264644) INFO 06-02 00:52:40 [api_server.py:584] Starting vLLM server on http://0.0.0.0:8000\n" +
		"(APIServer pid=1264644) INFO 06-02 00:52:40 [launcher.py:37] Available routes are:\n"
	tests := []struct {
		name    string
		log     string
		failure bool
		say     string // what the title says
	}{
		{"reached ready", start + ready, false, "no failure: the processes reached ready"},
		{"another logger's error, then progress", start, false, "no failure: the error lines were followed by normal progress"},
		{"a c10d retry, then ready", "[W1130 01:31:16.913963427 socket.cpp:764] [c10d] The client socket has failed to connect to [::ffff:10.0.0.1]:29500 (errno: 111 - Connection refused).\n" + ready, false, "no failure: the processes reached ready"},
		{"vLLM's own server line", starting, false, "no failure: the processes reached ready"},
		// A client that hung up mid-stream (uvicorn's traceback ends in a
		// ConnectionResetError), and the engine goes on.
		{"a peer's reset, then progress", "ConnectionResetError: [Errno 104] Connection reset by peer\n" + start[strings.Index(start, "INFO 04-03 10:00:05"):], false, "no failure: the error lines were followed by normal progress"},
		{"an error after ready", start + ready + "ERROR 04-03 10:05:00 [core.py:400] EngineCore encountered a fatal error.\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.25 GiB of which 1.02 MiB is free.\n", true, "CUDA out of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(Input{Logs: []Log{{Host: "gpu1", Source: "log", Text: []byte(tt.log)}}})
			if d.Failure != tt.failure || !strings.HasPrefix(d.Title, tt.say) {
				t.Fatalf("failure = %v, want %v, title %q, want %q…:\n%s", d.Failure, tt.failure, d.Title, tt.say, d.Text())
			}
		})
	}
}

// TestFatalErrorOneProcess: the quoted error is one process's words:
// lines of other processes that follow it (another worker's, the API
// server's) are neither quoted nor evidence.
func TestFatalErrorOneProcess(t *testing.T) {
	log := "(RayWorkerWrapper pid=2101, ip=10.0.0.3) ERROR 05-01 10:00:00 [multiproc_executor.py:470] RuntimeError: Worker rank 1 could not map the shared buffer\n" +
		"(RayWorkerWrapper pid=2101, ip=10.0.0.3) ERROR 05-01 10:00:00 [multiproc_executor.py:470]   mapped region 7 of 8\n" +
		"(RayWorkerWrapper pid=2100, ip=10.0.0.2) INFO 05-01 10:00:00 [shm_broadcast.py:200] No available shared memory broadcast block found in 60 second.\n" +
		"(APIServer pid=2000) INFO 05-01 10:00:01 [api_server.py:900] shutting down\n"
	d := Classify(Input{Logs: []Log{{Host: "gpu3", Source: "log", Text: []byte(log)}}})
	if d.Cause != FatalError || d.Known {
		t.Fatalf("cause %s known %v, want fatal-error, known false:\n%s", d.Cause, d.Known, d.Text())
	}
	for _, e := range d.Evidence {
		if !strings.Contains(e.Line, "pid=2101") {
			t.Errorf("evidence from another process: %q", e.Line)
		}
	}
	for _, other := range []string{"No available shared memory", "shutting down"} {
		if strings.Contains(d.Explanation, other) || strings.Contains(d.Title, other) {
			t.Errorf("quotes another process's line %q:\n%s", other, d.Text())
		}
	}
	if !strings.HasPrefix(d.Fix, "Layer: vLLM. On gpu3") {
		t.Errorf("fix is not vLLM's next step on gpu3:\n%s", d.Text())
	}
}

// TestAdviceChecked: advice a message gives is checked against the logs:
// a setting the logs show already in force is said not to apply.
func TestAdviceChecked(t *testing.T) {
	msg := "RuntimeError: The collective timed out. Please set TORCH_NCCL_TRACE_BUFFER_SIZE=1000 to record its trace.\n"
	tests := []struct {
		name, log string
		applies   bool
	}{
		{"not set", msg, true},
		{"already set", "TORCH_NCCL_TRACE_BUFFER_SIZE=1000 python3 train.py\n" + msg, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(Input{Logs: []Log{{Host: "gpu1", Source: "log", Text: []byte(tt.log)}}})
			said := strings.Contains(d.Fix, "The message itself says: Please set TORCH_NCCL_TRACE_BUFFER_SIZE=1000")
			noted := strings.Contains(d.Fix, "already in force (line 1), so that advice does not apply here")
			if !said || noted == tt.applies {
				t.Fatalf("advice said %v, noted as not applying %v, want noted %v:\n%s", said, noted, !tt.applies, d.Text())
			}
		})
	}
}
