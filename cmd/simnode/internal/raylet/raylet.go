// Package raylet is the simulated Ray raylet of one node: it registers the
// node with the GCS over TCP from the node's own network namespace, sends
// heartbeats, starts actor worker processes (re-executing simnode) with the
// node's environment, relays their messages and output, and runs Ray's
// memory monitor, killing the newest worker when the node's memory usage
// crosses RAY_memory_usage_threshold.
//
// Fast mode only: this is part of simnode's model of Ray, which the lab
// runs with `lab up -ray simnode` (lab up's default, `make demo
// RAY=simnode`, and the end-to-end tests whose subject is not Ray). No
// end-to-end test of Ray's behaviour uses it: those run the real Ray 2.53.0
// (`-ray real`).
package raylet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/cmd/simnode/internal/wire"
)

// WorkerCommand is the simnode internal command a raylet starts for an actor.
const WorkerCommand = "__ray-worker"

// Boot is the first line a worker process reads on stdin.
type Boot struct {
	ActorID   string          `json:"actor_id"`
	WorkerID  string          `json:"worker_id"`
	NodeID    string          `json:"node_id"`
	NodeIP    string          `json:"node_ip"`
	ClassName string          `json:"class_name"`
	JobID     string          `json:"job_id"`
	Spec      json.RawMessage `json:"spec"`
}

// WorkerLine is one line a worker writes on fd 3: a line of its output
// (Stream and Line) or a message for its owner (Msg).
type WorkerLine struct {
	Stream string          `json:"stream,omitempty"`
	Line   string          `json:"line,omitempty"`
	Msg    json.RawMessage `json:"msg,omitempty"`
}

// Config configures a raylet.
type Config struct {
	GCSAddr string
	Node    gcs.NodeInfo
	Env     sim.Env
	Exe     string
	LogDir  string
	Timing  *hw.Timing
	HW      *hw.Hardware
	Ledger  *memledger.Ledger
	Now     func() time.Time
	Pid     int
	// Log receives raylet.out lines.
	Log io.Writer
}

type worker struct {
	boot    Boot
	gpu     int // assigned GPU index, -1 for none
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	started time.Time
	oom     string // set when the memory monitor killed it
	done    chan struct{}
}

// Raylet is a running raylet.
type Raylet struct {
	cfg    Config
	client *gcs.Client
	nodeID string

	mu      sync.Mutex
	workers map[string]*worker // by actor id
	ooms    int
}

// NodeID returns the id the GCS assigned.
func (r *Raylet) NodeID() string { return r.nodeID }

func (r *Raylet) logf(level byte, file, format string, args ...any) {
	fmt.Fprintln(r.cfg.Log, pylog.RayCpp(r.cfg.Now(), level, r.cfg.Pid, r.cfg.Pid, file, fmt.Sprintf(format, args...)))
}

// Start registers with the GCS and starts serving; Run blocks until ctx ends
// or the GCS is lost for longer than the gcs_reconnect timing.
func Start(ctx context.Context, cfg Config) (*Raylet, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	r := &Raylet{cfg: cfg, workers: map[string]*worker{}}
	node := cfg.Node
	c, err := gcs.Dial(ctx, cfg.GCSAddr, cfg.Timing.Get("gcs_connect_timeout"), gcs.Hello{Role: "raylet", Node: &node}, r.handle)
	if err != nil {
		return nil, err
	}
	r.client = c
	r.nodeID = c.Welcome.NodeID
	r.logf('I', "main.cc:452", "Setting node ID node_id=%s", r.nodeID)
	return r, nil
}

// Run serves until ctx ends (graceful: unregister, kill workers) or the GCS
// connection is lost (returns an error after the reconnect timeout).
func (r *Raylet) Run(ctx context.Context) error {
	period := r.cfg.Timing.Get("heartbeat_period")
	hb := time.NewTicker(period)
	defer hb.Stop()
	var mon <-chan time.Time
	refresh, threshold := MonitorConfig(r.cfg.Env)
	if refresh > 0 && r.cfg.HW != nil {
		t := time.NewTicker(refresh)
		defer t.Stop()
		mon = t.C
	}
	r.beat()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = r.client.Conn.Call(sctx, "unregister", gcs.Heartbeat{NodeID: r.nodeID}, nil)
			cancel()
			r.killAll()
			r.client.Close()
			return nil
		case <-r.client.Conn.Done():
			r.logf('E', "gcs_rpc_client.h:203", "Failed to connect to GCS at address %s within %d seconds.", r.cfg.GCSAddr, int(r.cfg.Timing.Get("gcs_connect_timeout").Seconds()))
			t := time.NewTimer(r.cfg.Timing.Get("gcs_reconnect"))
			select {
			case <-ctx.Done():
				t.Stop()
				r.killAll()
				return nil
			case <-t.C:
			}
			r.killAll()
			msg := fmt.Sprintf("Failed to connect to GCS within %d seconds. GCS may have been killed. It's either GCS is terminated by `ray stop` or is killed unexpectedly. If it is killed unexpectedly, see the log file gcs_server.out. https://docs.ray.io/en/master/ray-observability/ray-logging.html#logging-directory-structure. The program will terminate.", int(r.cfg.Timing.Get("gcs_reconnect").Seconds()))
			r.logf('E', "gcs_rpc_client.h:542", "%s", msg)
			return errors.New(msg)
		case <-hb.C:
			r.beat()
		case <-mon:
			r.checkMemory(threshold)
		}
	}
}

func (r *Raylet) beat() {
	used, total := r.memory()
	_ = r.client.Conn.Send("heartbeat", gcs.Heartbeat{NodeID: r.nodeID, MemUsed: used * hw.MiB, MemTotal: total * hw.MiB})
}

// memory returns the node's used and total system memory in MiB.
func (r *Raylet) memory() (int64, int64) {
	if r.cfg.HW == nil {
		return 0, 0
	}
	return r.cfg.HW.BaseUsed() + r.cfg.Ledger.SysMiB(), r.cfg.HW.MemoryMiB
}

func (r *Raylet) handle(ctx context.Context, c *wire.Conn, m *wire.Msg) (any, error) {
	switch m.Op {
	case "spawn_actor":
		var req gcs.SpawnRequest
		if err := m.Decode(&req); err != nil {
			return nil, err
		}
		return r.spawn(ctx, &req)
	case "actor_msg":
		var am gcs.ActorMsg
		if err := m.Decode(&am); err != nil {
			return nil, err
		}
		r.mu.Lock()
		w := r.workers[am.ActorID]
		r.mu.Unlock()
		if w != nil {
			_, _ = w.stdin.Write(append(append([]byte(nil), am.Data...), '\n'))
		}
		return nil, nil
	case "kill_actor":
		var am gcs.ActorMsg
		if err := m.Decode(&am); err != nil {
			return nil, err
		}
		r.mu.Lock()
		w := r.workers[am.ActorID]
		r.mu.Unlock()
		if w != nil && w.cmd.Process != nil {
			_ = w.cmd.Process.Kill()
		}
		return nil, nil
	}
	return nil, fmt.Errorf("raylet: unknown op %q", m.Op)
}

func (r *Raylet) spawn(ctx context.Context, req *gcs.SpawnRequest) (*gcs.SpawnReply, error) {
	env := r.cfg.Env.Clone()
	for k, v := range req.Env {
		env[k] = v
	}
	// Ray sets CUDA_VISIBLE_DEVICES to the GPU it assigns the actor.
	gpu := -1
	if r.cfg.HW != nil && len(r.cfg.HW.GPUs) > 0 {
		r.mu.Lock()
		used := map[int]bool{}
		for _, w := range r.workers {
			used[w.gpu] = true
		}
		r.mu.Unlock()
		for i := range r.cfg.HW.GPUs {
			if !used[i] {
				gpu = i
				break
			}
		}
		if gpu >= 0 {
			env["CUDA_VISIBLE_DEVICES"] = strconv.Itoa(gpu)
		}
	}
	boot := Boot{ActorID: req.ActorID, WorkerID: gcs.NewID(28), NodeID: r.nodeID, NodeIP: r.cfg.Node.NodeIP, ClassName: req.ClassName, JobID: req.JobID, Spec: req.Spec}
	cmd := exec.Command(r.cfg.Exe, append([]string{WorkerCommand}, req.Args...)...)
	cmd.Args[0] = "ray::" + req.ClassName
	cmd.Env = env.List()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	pw.Close()
	pid := cmd.Process.Pid
	w := &worker{boot: boot, gpu: gpu, cmd: cmd, stdin: stdin, started: time.Now(), done: make(chan struct{})}
	r.mu.Lock()
	r.workers[req.ActorID] = w
	r.mu.Unlock()
	r.logf('I', "worker_pool.cc:718", "Started worker process with pid %d, the token is 0", pid)
	b, _ := json.Marshal(boot)
	if _, err := stdin.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("boot worker: %w", err)
	}
	var logs sync.WaitGroup
	logs.Add(1)
	for _, s := range []struct {
		name string
		rd   io.Reader
	}{{"stdout", stdout}, {"stderr", stderr}} {
		logs.Add(1)
		go func(stream string, rd io.Reader) {
			defer logs.Done()
			ext := ".out"
			if stream == "stderr" {
				ext = ".err"
			}
			var f *os.File
			if r.cfg.LogDir != "" {
				f, _ = os.Create(filepath.Join(r.cfg.LogDir, fmt.Sprintf("worker-%s-%s-%d%s", boot.WorkerID, req.JobID, pid, ext)))
			}
			sc := bufio.NewScanner(rd)
			sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
			for sc.Scan() {
				line := sc.Text()
				if f != nil {
					fmt.Fprintln(f, line)
				}
				_ = r.client.Conn.Send("actor_event", gcs.ActorEvent{ActorID: req.ActorID, Kind: gcs.EventLog, Stream: stream, Line: line, PID: pid, NodeIP: r.cfg.Node.NodeIP})
			}
			if f != nil {
				f.Close()
			}
		}(s.name, s.rd)
	}
	go func() {
		// fd 3 carries, in order, the worker's log lines and its replies,
		// so the owner sees a method's output before its result.
		defer logs.Done()
		files := map[string]*os.File{}
		defer func() {
			for _, f := range files {
				f.Close()
			}
		}()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			var wl WorkerLine
			if json.Unmarshal(sc.Bytes(), &wl) != nil {
				continue
			}
			if wl.Stream != "" {
				f := files[wl.Stream]
				if f == nil && r.cfg.LogDir != "" {
					ext := map[string]string{"stdout": ".out", "stderr": ".err"}[wl.Stream]
					f, _ = os.OpenFile(filepath.Join(r.cfg.LogDir, fmt.Sprintf("worker-%s-%s-%d%s", boot.WorkerID, req.JobID, pid, ext)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
					files[wl.Stream] = f
				}
				if f != nil {
					fmt.Fprintln(f, wl.Line)
				}
				_ = r.client.Conn.Send("actor_event", gcs.ActorEvent{ActorID: req.ActorID, Kind: gcs.EventLog, Stream: wl.Stream, Line: wl.Line, PID: pid, NodeIP: r.cfg.Node.NodeIP})
				continue
			}
			_ = r.client.Conn.Send("actor_event", gcs.ActorEvent{ActorID: req.ActorID, Kind: gcs.EventMsg, Data: wl.Msg, PID: pid, NodeIP: r.cfg.Node.NodeIP})
		}
		pr.Close()
	}()
	go func() {
		logs.Wait()
		err := cmd.Wait()
		close(w.done)
		r.mu.Lock()
		delete(r.workers, req.ActorID)
		oom := w.oom
		r.mu.Unlock()
		r.cfg.Ledger.Remove(pid)
		ev := gcs.ActorEvent{ActorID: req.ActorID, Kind: gcs.EventDied, PID: pid, NodeIP: r.cfg.Node.NodeIP}
		switch {
		case oom != "":
			ev.ExitType, ev.ExitDetail = "NODE_OUT_OF_MEMORY", oom
		case err == nil:
			ev.ExitType, ev.ExitDetail = "INTENDED_USER_EXIT", "Worker exits with an exit code 0."
		default:
			ev.ExitType = "SYSTEM_ERROR"
			ev.ExitDetail = fmt.Sprintf("Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors. (%v)", err)
		}
		_ = r.client.Conn.Send("actor_event", ev)
	}()
	return &gcs.SpawnReply{PID: pid, WorkerID: boot.WorkerID}, nil
}

func (r *Raylet) killAll() {
	r.mu.Lock()
	ws := make([]*worker, 0, len(r.workers))
	for _, w := range r.workers {
		ws = append(ws, w)
	}
	r.mu.Unlock()
	for _, w := range ws {
		if w.cmd.Process != nil {
			_ = w.cmd.Process.Kill()
		}
	}
	for _, w := range ws {
		select {
		case <-w.done:
		case <-time.After(2 * time.Second):
		}
	}
}

// MonitorConfig reads Ray's memory monitor settings from the raylet's
// environment: RAY_memory_monitor_refresh_ms (default 250, 0 disables) and
// RAY_memory_usage_threshold (default 0.95).
func MonitorConfig(env sim.Env) (time.Duration, float64) {
	refresh := 250 * time.Millisecond
	if v, ok := env.Lookup("RAY_memory_monitor_refresh_ms"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			refresh = time.Duration(n) * time.Millisecond
		}
	}
	threshold := 0.95
	if v, ok := env.Lookup("RAY_memory_usage_threshold"); ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
			threshold = f
		}
	}
	return refresh, threshold
}

// checkMemory is one run of the memory monitor.
func (r *Raylet) checkMemory(threshold float64) {
	used, total := r.memory()
	if total <= 0 || float64(used)/float64(total) <= threshold {
		return
	}
	// Kill the most recently started worker (Ray's group-by-owner policy
	// picks the newest task of the largest group; here every worker is an
	// actor of the same owner).
	r.mu.Lock()
	var victim *worker
	for _, w := range r.workers {
		if w.oom == "" && (victim == nil || w.started.After(victim.started)) {
			victim = w
		}
	}
	if victim == nil {
		r.mu.Unlock()
		return
	}
	pid := victim.cmd.Process.Pid
	entries := r.cfg.Ledger.Entries()
	var procMiB int64
	for _, e := range entries {
		if e.PID == pid {
			procMiB = e.SysMiB
		}
	}
	msg := OOMMessage(OOMInfo{
		NodeIP: r.cfg.Node.NodeIP, NodeID: r.nodeID, ActorID: victim.boot.ActorID, TaskName: victim.boot.ClassName + ".execute_method",
		PID: pid, ProcBytes: procMiB * hw.MiB, UsedBytes: used * hw.MiB, TotalBytes: total * hw.MiB, Threshold: threshold,
		WorkerID: victim.boot.WorkerID, Top: entries,
	})
	victim.oom = msg
	r.ooms++
	r.mu.Unlock()
	r.logf('I', "memory_monitor.cc:81", "Node memory usage above threshold, used: %d, total: %d, usage fraction: %f, threshold: %g", used*hw.MiB, total*hw.MiB, float64(used)/float64(total), threshold)
	r.logf('E', "node_manager.cc:3069", "Killing worker with pid %d to free up memory.", pid)
	_ = victim.cmd.Process.Kill()
	line := fmt.Sprintf("[%s E %d %d] (raylet) node_manager.cc:3277: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: %s, IP: %s) over the last time period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip %s`",
		pylog.PyTime(r.cfg.Now()), r.cfg.Pid, r.cfg.Pid, r.nodeID, r.cfg.Node.NodeIP, r.cfg.Node.NodeIP)
	for _, l := range []string{line, "", oomAdvice} {
		_ = r.client.Conn.Send("broadcast_log", gcs.LogLine{Line: l, NodeIP: r.cfg.Node.NodeIP})
	}
}

const oomAdvice = "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero."

// OOMInfo is what Ray's OOM error message names.
type OOMInfo struct {
	NodeIP, NodeID, ActorID, TaskName, WorkerID string
	PID                                         int
	ProcBytes, UsedBytes, TotalBytes            int64
	Threshold                                   float64
	Top                                         []memledger.Entry
}

func gb(b int64) string { return fmt.Sprintf("%.2fGB", float64(b)/(1<<30)) }

// OOMMessage renders the error Ray attaches to a task or actor killed by the
// memory monitor (ray.exceptions.OutOfMemoryError's text).
func OOMMessage(o OOMInfo) string {
	top := append([]memledger.Entry(nil), o.Top...)
	sort.SliceStable(top, func(i, j int) bool { return top[i].SysMiB > top[j].SysMiB })
	if len(top) > 10 {
		top = top[:10]
	}
	s := "Task was killed due to the node running low on memory.\n"
	s += fmt.Sprintf("Memory on the node (IP: %s, ID: %s) where the task (actor ID: %s, name=%s, pid=%d, memory used=%s) was running was %s / %s (%f), which exceeds the memory usage threshold of %g. Ray killed this worker (ID: %s) because it was the most recently scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip %s`. To see the logs of the worker, use `ray logs worker-%s*out -ip %s. Top 10 memory users:\n",
		o.NodeIP, o.NodeID, o.ActorID, o.TaskName, o.PID, gb(o.ProcBytes), gb(o.UsedBytes), gb(o.TotalBytes), float64(o.UsedBytes)/float64(o.TotalBytes), o.Threshold, o.WorkerID, o.NodeIP, o.WorkerID, o.NodeIP)
	s += "PID\tMEM(GB)\tCOMMAND\n"
	for _, e := range top {
		s += fmt.Sprintf("%d\t%.2f\t%s\n", e.PID, float64(e.SysMiB)/1024, e.Command)
	}
	s += "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. Set max_restarts and max_task_retries to enable retry when the task crashes due to OOM. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero."
	return s
}
