package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/netx"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/cmd/simnode/internal/torchdist"
)

// WorkerSpec is what the engine tells every worker at creation.
type WorkerSpec struct {
	Model           string            `json:"model"`
	WeightsMiB      int64             `json:"weights_mib"` // this rank's share
	Shards          int               `json:"shards"`
	Utilization     float64           `json:"gpu_memory_utilization"`
	EnforceEager    bool              `json:"enforce_eager"`
	KVBytesPerToken int64             `json:"kv_bytes_per_token"` // this rank's share
	MaxModelLen     int               `json:"max_model_len"`
	Timing          map[string]string `json:"timing"`
	VLLMVersion     string            `json:"vllm_version"`
}

// InitArgs are init_worker's arguments.
type InitArgs struct {
	Rank       int    `json:"rank"`
	LocalRank  int    `json:"local_rank"`
	WorldSize  int    `json:"world_size"`
	InitMethod string `json:"distributed_init_method"`
	// ExternalRendezvous: the caller (the real-Ray actor of
	// ray_executor.py) runs torch's own c10d rendezvous and Gloo after
	// init_device, so the worker does only the device's part.
	ExternalRendezvous bool `json:"external_rendezvous,omitempty"`
	// C10dTimeoutS is the rendezvous timeout the caller gives torch.
	C10dTimeoutS float64 `json:"c10d_timeout_s,omitempty"`
}

// Call is one collective_rpc from the engine to a worker.
type Call struct {
	Seq    int             `json:"seq"`
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args,omitempty"`
}

// Reply answers a Call.
type Reply struct {
	Seq    int             `json:"seq"`
	Result json.RawMessage `json:"result,omitempty"`
	// ErrType and ErrMsg describe the Python exception raised.
	ErrType string `json:"err_type,omitempty"`
	ErrMsg  string `json:"err_msg,omitempty"`
	// Trace is the traceback printed before the exception line.
	Trace []string `json:"trace,omitempty"`
}

// LoadResult is what load_model reports.
type LoadResult struct {
	Seconds float64 `json:"seconds"`
	GiB     float64 `json:"gib"`
}

// MemResult is what determine_available_memory reports.
type MemResult struct {
	KVBytes int64 `json:"kv_bytes"`
}

// Worker is one vLLM GPU worker (RayWorkerWrapper or a local worker).
type Worker struct {
	Env    sim.Env
	Out    io.Writer // stdout (vLLM logger lines)
	Err    io.Writer // stderr (progress bars, torch, NCCL)
	Now    func() time.Time
	Pid    int
	Host   string
	Slot   int
	Spec   WorkerSpec
	HW     *hw.Hardware
	Ledger *memledger.Ledger

	timing   *hw.Timing
	init     InitArgs
	gpu      int
	store    *torchdist.Store
	usedMiB  int64
	rnd      *rand.Rand
	reqBytes int64
}

func (w *Worker) log(level, file, format string, args ...any) {
	fmt.Fprintln(w.Out, pylog.VLLM(w.Now(), level, file, fmt.Sprintf(format, args...)))
}

func (w *Worker) setUsage(mib int64) {
	w.usedMiB = mib
	if w.Ledger == nil || w.HW == nil {
		return
	}
	e := memledger.Entry{PID: w.Pid, Slot: w.Slot, GPU: w.gpu, Command: "ray::RayWorkerWrapper.execute_method"}
	if w.HW.Unified(w.gpu) {
		e.SysMiB = mib
	} else {
		e.GPUMiB = mib
	}
	_ = w.Ledger.Set(e)
}

// Handle runs one method.
func (w *Worker) Handle(ctx context.Context, c Call) Reply {
	r := Reply{Seq: c.Seq}
	res, err := w.dispatch(ctx, c)
	if err != nil {
		var pe *torchdist.PyError
		if errors.As(err, &pe) {
			r.ErrType, r.ErrMsg = pe.Type, pe.Msg
		} else {
			r.ErrType, r.ErrMsg = "RuntimeError", err.Error()
		}
		r.Trace = traceFor(c.Method)
		// worker_base.execute_method logs the failure before re-raising.
		head := pylog.VLLM(w.Now(), "ERROR", "worker_base.py:623", "")
		fmt.Fprintln(w.Out, head+fmt.Sprintf("Error executing method '%s'. This might cause deadlock in distributed execution.", c.Method))
		for _, l := range r.Trace {
			fmt.Fprintln(w.Out, head+l)
		}
		for _, l := range strings.Split(r.ErrType+": "+r.ErrMsg, "\n") {
			fmt.Fprintln(w.Out, head+l)
		}
		return r
	}
	if res != nil {
		r.Result, _ = json.Marshal(res)
	}
	return r
}

func traceFor(method string) []string {
	t := []string{
		"Traceback (most recent call last):",
		`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/worker_base.py", line 336, in execute_method`,
		"    return run_method(self, method, args, kwargs)",
		`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/serial_utils.py", line 479, in run_method`,
		"    return func(*args, **kwargs)",
	}
	switch method {
	case "init_device":
		t = append(t,
			`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 232, in init_device`,
			"    init_worker_distributed_environment(self.vllm_config, self.rank,",
			`  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/parallel_state.py", line 1184, in init_distributed_environment`,
			"    torch.distributed.init_process_group(")
	case "determine_available_memory":
		t = append(t, `  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 298, in determine_available_memory`)
	}
	return t
}

func (w *Worker) dispatch(ctx context.Context, c Call) (any, error) {
	if w.timing == nil {
		t, err := hw.TimingFromMap(w.Spec.Timing)
		if err != nil {
			return nil, err
		}
		w.timing = t
		w.rnd = rand.New(rand.NewSource(int64(w.Pid)*31 + int64(w.Slot)))
	}
	switch c.Method {
	case "get_node_ip":
		return GetIP(ctx, w.Env, w.Out, w.Now), nil
	case "update_environment_variables":
		var vars map[string]string
		if err := json.Unmarshal(c.Args, &vars); err != nil {
			return nil, err
		}
		for k, v := range vars {
			w.Env[k] = v
		}
		return nil, nil
	case "init_worker":
		return nil, json.Unmarshal(c.Args, &w.init)
	case "init_device":
		return nil, w.initDevice(ctx)
	case "load_model":
		return w.loadModel(ctx)
	case "determine_available_memory":
		return w.determineMemory(ctx)
	case "initialize_cache":
		w.setUsage(w.reqBytes / hw.MiB)
		return nil, nil
	case "compile_or_warm_up_model":
		return nil, w.warmUp(ctx)
	case "shutdown":
		if w.store != nil {
			w.store.Close()
		}
		return nil, nil
	}
	return nil, fmt.Errorf("AttributeError: 'Worker' object has no attribute '%s'", c.Method)
}

// device returns the physical GPU index this worker uses
// (CUDA_VISIBLE_DEVICES set by Ray, else the local rank).
func (w *Worker) device() int {
	if v := w.Env.Get("CUDA_VISIBLE_DEVICES"); v != "" {
		if n, err := strconv.Atoi(strings.Split(v, ",")[0]); err == nil {
			return n
		}
	}
	return w.init.LocalRank
}

func gib(b float64) string { return pylog.PyFloat(math.Round(b/(1<<30)*100) / 100) }

func (w *Worker) initDevice(ctx context.Context) error {
	if w.HW == nil || len(w.HW.GPUs) == 0 {
		return &torchdist.PyError{Type: "RuntimeError", Msg: "No CUDA GPUs are available"}
	}
	w.gpu = w.device()
	if w.gpu >= len(w.HW.GPUs) {
		return &torchdist.PyError{Type: "RuntimeError", Msg: "CUDA error: invalid device ordinal"}
	}
	total := w.HW.DeviceTotalMiB(w.gpu) * hw.MiB
	var used int64
	if w.HW.Unified(w.gpu) {
		used = (w.HW.BaseUsed() + w.Ledger.SysMiB()) * hw.MiB
	} else {
		used = w.Ledger.GPUMiB(w.gpu) * hw.MiB
	}
	free := total - used
	w.reqBytes = int64(float64(total) * w.Spec.Utilization)
	if free < w.reqBytes {
		return &torchdist.PyError{Type: "ValueError", Msg: fmt.Sprintf("Free memory on device cuda:%d (%s/%s GiB) on startup is less than desired GPU memory utilization (%s, %s GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
			w.init.LocalRank, gib(float64(free)), gib(float64(total)), pylog.PyFloat(w.Spec.Utilization), gib(float64(w.reqBytes)))}
	}
	w.setUsage(480) // CUDA context
	if w.init.ExternalRendezvous {
		w.log("INFO", "parallel_state.py:1325", "rank %d in world size %d is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank %d, EP rank %d", w.init.Rank, w.init.WorldSize, w.init.Rank, w.init.Rank)
		return nil
	}
	u, err := url.Parse(w.init.InitMethod)
	if err != nil || u.Scheme != "tcp" {
		return &torchdist.PyError{Type: "ValueError", Msg: "Invalid init_method " + w.init.InitMethod}
	}
	port, _ := strconv.Atoi(u.Port())
	env := &torchdist.Env{Log: w.Err, Now: w.Now, Host: w.Host, Pid: w.Pid, Rand: w.rnd}
	timeout := w.timing.Get("c10d_timeout")
	st, err := torchdist.Rendezvous(ctx, env, u.Hostname(), port, w.init.Rank, w.init.WorldSize, timeout)
	if err != nil {
		return err
	}
	w.store = st
	ifaces, err := netx.Interfaces()
	if err != nil {
		return err
	}
	if err := torchdist.GlooCheck(w.Env.Get("GLOO_SOCKET_IFNAME"), ifaces); err != nil {
		st.Close()
		return err
	}
	w.log("INFO", "parallel_state.py:1325", "rank %d in world size %d is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank %d, EP rank %d", w.init.Rank, w.init.WorldSize, w.init.Rank, w.init.Rank)
	if w.init.WorldSize > 1 {
		cfg := torchdist.NCCLConfig{SocketIfname: w.Env.Get("NCCL_SOCKET_IFNAME"), Debug: w.Env.Get("NCCL_DEBUG"), IBDisable: w.Env.Get("NCCL_IB_DISABLE") == "1"}
		w.log("INFO", "pynccl.py:111", "vLLM is using nccl==%s", torchdist.NCCLVersion)
		if err := torchdist.NCCLInit(ctx, env, cfg, st, w.init.Rank, w.init.WorldSize, w.init.LocalRank, timeout); err != nil {
			st.Close()
			return err
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (w *Worker) loadModel(ctx context.Context) (*LoadResult, error) {
	start := time.Now()
	w.log("INFO", "gpu_model_runner.py:3338", "Starting to load model %s...", w.Spec.Model)
	shards := max(w.Spec.Shards, 1)
	if filepath.IsAbs(w.Spec.Model) {
		// A model path (a snapshot after HF_HUB_OFFLINE): this node's own
		// copy is what loads, or fails as vLLM's loader does (hfcache.go).
		if typ, msg := weightsError(w.Spec.Model); typ != "" {
			return nil, &torchdist.PyError{Type: typ, Msg: msg}
		}
		shards = max(len(weightFiles(w.Spec.Model)), 1)
	}
	total := w.timing.Get("weight_load")
	per := total / time.Duration(shards)
	rank0 := w.init.Rank == 0
	const desc = "Loading safetensors checkpoint shards"
	if rank0 {
		fmt.Fprintln(w.Err, pylog.WeightsProgress(desc, 0, shards, 0))
	}
	base := w.usedMiB
	for i := 1; i <= shards; i++ {
		if err := sleepCtx(ctx, per); err != nil {
			return nil, err
		}
		w.setUsage(base + w.Spec.WeightsMiB*int64(i)/int64(shards))
		if rank0 {
			fmt.Fprintln(w.Err, pylog.WeightsProgress(desc, i, shards, time.Since(start)))
		}
	}
	secs := time.Since(start).Seconds()
	gibs := float64(w.Spec.WeightsMiB) / 1024
	w.log("INFO", "default_loader.py:314", "Loading weights took %.2f seconds", secs)
	w.log("INFO", "gpu_model_runner.py:3420", "Model loading took %.4f GiB memory and %.6f seconds", gibs, secs)
	return &LoadResult{Seconds: secs, GiB: gibs}, nil
}

func (w *Worker) determineMemory(ctx context.Context) (*MemResult, error) {
	if err := sleepCtx(ctx, w.timing.Get("profile_run")); err != nil {
		return nil, err
	}
	const activationMiB = 1536
	nonTorch := int64(480)
	kv := w.reqBytes - (w.Spec.WeightsMiB+activationMiB+nonTorch)*hw.MiB
	w.log("INFO", "gpu_worker.py:359", "Available KV cache memory: %.2f GiB", float64(kv)/(1<<30))
	if kv <= 0 {
		return nil, &torchdist.PyError{Type: "ValueError", Msg: "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."}
	}
	return &MemResult{KVBytes: kv}, nil
}

func (w *Worker) warmUp(ctx context.Context) error {
	if w.Spec.EnforceEager {
		return nil
	}
	start := time.Now()
	pool := w.HW.GraphPoolMiB
	d := w.timing.Get("graph_capture")
	rank0 := w.init.Rank == 0
	bars := []struct {
		desc string
		n    int
		frac float64
	}{{"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 67, 0.6}, {"Capturing CUDA graphs (decode, FULL)", 35, 0.4}}
	for i, b := range bars {
		bs := time.Now()
		steps := 4
		for s := 0; s <= steps; s++ {
			if s > 0 {
				if err := sleepCtx(ctx, time.Duration(float64(d)*b.frac)/time.Duration(steps)); err != nil {
					return err
				}
			}
			if rank0 {
				end := "\r"
				if s == steps {
					end = "\n"
				}
				fmt.Fprint(w.Err, pylog.Bar(b.desc, b.n*s/steps, b.n, time.Since(bs))+end)
			}
			if i == 0 && s == 0 {
				// The pool grows once capture has begun: the first bar
				// is out before the memory that may get the worker
				// killed (Ray's memory monitor samples every
				// RAY_memory_monitor_refresh_ms).
				w.setUsage(w.usedMiB + pool)
			}
		}
	}
	w.log("INFO", "gpu_model_runner.py:4235", "Graph capturing finished in %d secs, took %.2f GiB", int(math.Round(time.Since(start).Seconds())), float64(pool)/1024)
	return nil
}

// GetIP is vllm.utils.network_utils.get_ip(): VLLM_HOST_IP, else the
// source address towards 8.8.8.8 (then 2001:4860:4860::8888), else 0.0.0.0
// with a warning. HOST_IP is ignored with a deprecation warning.
func GetIP(ctx context.Context, env sim.Env, out io.Writer, now func() time.Time) string {
	if env.Get("HOST_IP") != "" {
		fmt.Fprintln(out, pylog.VLLM(now(), "WARNING", "network_utils.py:54", "The environment variable HOST_IP is deprecated and ignored, as it is often used by Docker and other software to interact with the container's network stack. Please use VLLM_HOST_IP instead to set the IP address for vLLM processes to communicate with each other."))
	}
	if ip := env.Get("VLLM_HOST_IP"); ip != "" {
		return ip
	}
	if ip, err := netx.SourceIP(ctx, "udp4", "8.8.8.8:80"); err == nil {
		return ip.String()
	}
	if ip, err := netx.SourceIP(ctx, "udp6", net.JoinHostPort("2001:4860:4860::8888", "80")); err == nil {
		return ip.String()
	}
	fmt.Fprintln(out, pylog.VLLM(now(), "WARNING", "network_utils.py:78", "Failed to get the IP address, using 0.0.0.0 by default.The value can be set by the environment variable VLLM_HOST_IP or HOST_IP."))
	return "0.0.0.0"
}
