package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/golden"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestAcceptedSpellings(t *testing.T) {
	p := serveParser()
	res, err := p.Parse([]string{"M", "-tp", "2", "--pipeline_parallel=2", "--max-model", "32k", "--served-model-name", "a", "b", "--no-enforce-eager", "--gpu-memory-utilization", "0.85", "--port", "1", "--port=8001"})
	if err != nil {
		t.Fatal(err.Format())
	}
	if res.Positional != "M" || res.Int("tensor_parallel_size") != 2 || res.Int("pipeline_parallel_size") != 2 || res.Int("max_model_len") != 32000 ||
		strings.Join(res.List("served_model_name"), ",") != "a,b" || res.Bool("enforce_eager") || res.Float("gpu_memory_utilization") != 0.85 || res.Int("port") != 8001 {
		t.Errorf("unexpected parse: %+v", res)
	}
}

func testLog() (*plog, *bytes.Buffer) {
	var b bytes.Buffer
	return &plog{mu: &sync.Mutex{}, out: &b, err: &b, now: func() time.Time { return time.Date(2026, 11, 29, 23, 20, 0, 0, time.UTC) }}, &b
}

// vLLM's ray_env.py rules (ray-vllm-facts.md §2.5): prefixes copied,
// worker-specific and non-carry-over names kept per host, GLOO_ not copied.
func TestEnvToCopy(t *testing.T) {
	cfg := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg, "ray_non_carry_over_env_vars.json"), []byte(`["NCCL_IB_HCA"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := sim.Env{
		"VLLM_CONFIG_ROOT": cfg, "VLLM_HOST_IP": "192.168.200.12", "NCCL_SOCKET_IFNAME": "enp1s0f1np1", "NCCL_IB_HCA": "rocep1s0f1",
		"GLOO_SOCKET_IFNAME": "enp1s0f1np1", "HF_TOKEN": "x", "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0", "FN_X": "1", "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": "FN_",
	}
	l, logged := testLog()
	got := envToCopy(env, l)
	want := map[string]string{"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "HF_TOKEN": "x", "FN_X": "1", "VLLM_CONFIG_ROOT": cfg, "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": "FN_"}
	if len(got) != len(want) {
		t.Errorf("copied %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("copied %s=%q, want %q", k, got[k], v)
		}
	}
	for _, line := range []string{
		"Env var prefixes to copy: ['FN_', 'HF_', 'HUGGING_FACE_', 'LMCACHE_', 'NCCL_', 'UCX_', 'VLLM_']",
		"RAY_NON_CARRY_OVER_ENV_VARS from config: {'NCCL_IB_HCA'}",
		"To exclude env vars from copying, add them to " + filepath.Join(cfg, "ray_non_carry_over_env_vars.json"),
	} {
		if !strings.Contains(logged.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, logged)
		}
	}
}

// A worker on a node whose free memory is below the requested utilization
// fails with vLLM's error (ray-vllm-facts.md §3.7).
func TestFreeMemoryCheck(t *testing.T) {
	h, err := hw.Parse([]byte(`{"gpus":[{"name":"NVIDIA H100","memory_mib":81559}],"memory_mib":2000000}`))
	if err != nil {
		t.Fatal(err)
	}
	ledger := memledger.At(t.TempDir())
	// Another process (this test) holds 65 GiB of the device.
	if err := ledger.Set(memledger.Entry{PID: os.Getpid(), Slot: 99, GPU: 0, GPUMiB: 65 * 1024, Command: "python3"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w := &Worker{Env: sim.Env{}, Out: &out, Err: &out, Now: time.Now, Pid: 1, Spec: WorkerSpec{Utilization: 0.9, Timing: hw.DefaultTiming(sim.Env{}).Map()}, HW: h, Ledger: ledger}
	args, _ := json.Marshal(InitArgs{Rank: 0, WorldSize: 1, InitMethod: "tcp://127.0.0.1:1"})
	if r := w.Handle(context.Background(), Call{Method: "init_worker", Args: args}); r.ErrType != "" {
		t.Fatal(r.ErrMsg)
	}
	r := w.Handle(context.Background(), Call{Method: "init_device"})
	want := "Free memory on device cuda:0 (14.65/79.65 GiB) on startup is less than desired GPU memory utilization (0.9, 71.68 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
	if r.ErrType != "ValueError" || r.ErrMsg != want {
		t.Errorf("got %s: %s\nwant ValueError: %s", r.ErrType, r.ErrMsg, want)
	}
	if !strings.Contains(out.String(), "Error executing method 'init_device'. This might cause deadlock in distributed execution.") {
		t.Errorf("worker did not log the failure:\n%s", out.String())
	}
}

func TestGetIPPrefersVLLMHostIP(t *testing.T) {
	var out bytes.Buffer
	if ip := GetIP(context.Background(), sim.Env{"VLLM_HOST_IP": "192.168.200.13", "HOST_IP": "1.2.3.4"}, &out, time.Now); ip != "192.168.200.13" {
		t.Errorf("GetIP = %s", ip)
	}
	if !strings.Contains(out.String(), "The environment variable HOST_IP is deprecated and ignored") {
		t.Errorf("no HOST_IP deprecation warning: %q", out.String())
	}
}

// A SIGTERM while vLLM initialises ends it the way vLLM's run_server does:
// KeyboardInterrupt("terminated") (vllm-project/vllm#17386, #15997).
func TestSIGTERMWhileStarting(t *testing.T) {
	var out bytes.Buffer
	lw := &lockedWriter{w: &out}
	env := sim.Env{"SIMNODE_HARDWARE": golden.Path("hardware", "h200x2.json"), "SIMNODE_STATE_DIR": t.TempDir(), "SIMNODE_ENGINE_INIT": "1h"}
	p := &sim.Proc{Args: []string{"serve", "Qwen/Qwen3-0.6B", "--port", "0"}, Env: env, Stdout: lw, Stderr: lw, Now: time.Now, Pid: 7}
	code := make(chan int, 1)
	go func() { code <- Main(context.Background(), p) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(lw.String(), "Initializing a V1 LLM engine") {
		if time.Now().After(deadline) {
			t.Fatalf("vllm serve did not reach engine initialisation:\n%s", lw.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != 1 {
		t.Errorf("exit %d, want 1", c)
	}
	for _, want := range []string{"(APIServer pid=7) Traceback (most recent call last):", `(APIServer pid=7)     raise KeyboardInterrupt("terminated")`, "(APIServer pid=7) KeyboardInterrupt: terminated\n"} {
		if !strings.Contains(lw.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, lw.String())
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  interface {
		Write([]byte) (int, error)
		String() string
	}
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
