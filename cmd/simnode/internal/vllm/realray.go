package vllm

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// realRaySource is vLLM 0.17.1's Ray executor on the real Ray and real
// torch.distributed (see the file's header for the vLLM sources it follows).
//
//go:embed ray_executor.py
var realRaySource string

// realRayOnPath reports whether the ray on PATH is the real Ray (a Python
// entry point, as in the lab's -ray real image), not simnode's.
func realRayOnPath(env sim.Env) bool {
	for _, dir := range filepath.SplitList(env.Get("PATH")) {
		p := filepath.Join(dir, "ray")
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		return err == nil && filepath.Base(real) != "simnode"
	}
	return false
}

// realRayWorker is one RayWorkerWrapper actor as the driver knows it.
type realRayWorker struct {
	PID     int    `json:"pid"`
	ActorID string `json:"actor_id"`
	IP      string `json:"ip"`
}

// ctlMsg is one line ray_executor.py writes on fd 3.
type ctlMsg struct {
	Log *struct {
		Level, File, Msg string
	} `json:"log"`
	Error *struct {
		Type  string   `json:"type"`
		Msg   string   `json:"msg"`
		Trace []string `json:"trace"`
	} `json:"error"`
	Started *struct {
		DriverIP   string              `json:"driver_ip"`
		Workers    []realRayWorker     `json:"workers"`
		LocalRanks []int               `json:"local_ranks"`
		Env        []map[string]string `json:"env"`
	} `json:"started"`
	Replies []Reply `json:"replies"`
}

// realRayExecutor is vLLM's RayDistributedExecutor on the real Ray: the
// python3 of the image runs ray_executor.py, which joins the cluster,
// places the workers and starts one actor per bundle; every actor runs
// simnode's Go worker for the simulated phases and real torch for the
// c10d rendezvous and a Gloo all_reduce.
type realRayExecutor struct {
	p     *sim.Proc
	core  *plog
	tm    *hw.Timing
	spec  WorkerSpec
	world int
	tp    int

	cmd        *exec.Cmd
	stdin      io.WriteCloser
	ctl        *bufio.Scanner
	driverIP   string
	workers    []realRayWorker
	localRanks []int
}

func newRealRayExecutor(p *sim.Proc, core *plog, tm *hw.Timing, spec WorkerSpec, world, tp int) *realRayExecutor {
	return &realRayExecutor{p: p, core: core, tm: tm, spec: spec, world: world, tp: tp}
}

func (x *realRayExecutor) WorldSize() int   { return x.world }
func (x *realRayExecutor) DriverIP() string { return x.driverIP }

func (x *realRayExecutor) Start(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return pyException(engineTrace, "RuntimeError", err.Error())
	}
	python, err := lookPath(x.p.Env, "python3")
	if err != nil {
		return pyException(engineTrace, "ValueError", "Failed to import Ray: No module named 'ray'. Please install Ray with `pip install ray`.")
	}
	pgTimeout := x.tm.Get("placement_group_timeout")
	cfg := map[string]any{
		"world_size":           x.world,
		"tensor_parallel_size": x.tp,
		"simnode":              self,
		"spec":                 x.spec,
		"pg_timeout_s":         pgTimeout.Seconds(),
		"pg_timeout_shown":     int(pgTimeout.Seconds()),
		"pg_wait_interval_s":   x.tm.Get("placement_group_wait_interval").Seconds(),
		"engine_trace":         engineTrace,
		"env_copy":             envToCopy(x.p.Env, x.core),
	}
	if a := x.p.Env.Get("RAY_ADDRESS"); a != "" {
		cfg["ray_address"] = a
	}
	first, _ := json.Marshal(cfg)
	r, w, err := os.Pipe()
	if err != nil {
		return pyException(engineTrace, "RuntimeError", err.Error())
	}
	cmd := exec.CommandContext(ctx, python, "-u", "-c", realRaySource)
	cmd.Env = x.p.Env.List()
	cmd.Stdout = &lineWriter{emit: x.core.Raw}
	cmd.Stderr = &lineWriter{emit: x.core.RawErr}
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return pyException(engineTrace, "RuntimeError", err.Error())
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		r.Close()
		return pyException(engineTrace, "RuntimeError", err.Error())
	}
	w.Close()
	x.cmd, x.stdin = cmd, stdin
	x.ctl = bufio.NewScanner(r)
	x.ctl.Buffer(make([]byte, 1<<20), 16<<20)
	if _, err := stdin.Write(append(first, '\n')); err != nil {
		return pyException(engineTrace, "RuntimeError", err.Error())
	}
	m, err := x.next()
	if err != nil {
		return err
	}
	if m.Started == nil {
		return pyException(engineTrace, "RuntimeError", "ray executor: no workers started")
	}
	x.driverIP, x.workers, x.localRanks = m.Started.DriverIP, m.Started.Workers, m.Started.LocalRanks
	env := m.Started.Env
	_, err = x.Collective(ctx, "update_environment_variables", func(r int) any { return env[r] })
	return err
}

// next relays log messages and returns the next other message, or the
// executor's exception.
func (x *realRayExecutor) next() (*ctlMsg, error) {
	for x.ctl.Scan() {
		var m ctlMsg
		if err := json.Unmarshal(x.ctl.Bytes(), &m); err != nil {
			continue
		}
		switch {
		case m.Log != nil:
			switch m.Log.Level {
			case "WARNING":
				x.core.Warn(m.Log.File, "%s", m.Log.Msg)
			case "ERROR":
				x.core.Error(m.Log.File, "%s", m.Log.Msg)
			default:
				x.core.Info(m.Log.File, "%s", m.Log.Msg)
			}
		case m.Error != nil:
			return nil, pyException(m.Error.Trace, m.Error.Type, m.Error.Msg)
		default:
			return &m, nil
		}
	}
	// The driver died without a word: its traceback is in its stderr.
	err := x.cmd.Wait()
	return nil, pyException(engineTrace, "RuntimeError", fmt.Sprintf("the Ray driver (python3) exited: %v", err))
}

// Collective runs method on every worker through collective_rpc.
func (x *realRayExecutor) Collective(ctx context.Context, method string, args func(int) any) ([]json.RawMessage, error) {
	c := map[string]any{"method": method}
	if args != nil {
		all := make([]any, x.world)
		for r := range all {
			all[r] = args(r)
			if ia, ok := all[r].(InitArgs); ok {
				// vLLM: local_rank = node_workers[node_id].index(rank);
				// the rendezvous is real torch's, in the actor.
				if r < len(x.localRanks) {
					ia.LocalRank = x.localRanks[r]
				}
				ia.ExternalRendezvous = true
				ia.C10dTimeoutS = x.tm.Get("c10d_timeout").Seconds()
				all[r] = ia
			}
		}
		c["args"] = all
	}
	b, _ := json.Marshal(c)
	if _, err := x.stdin.Write(append(b, '\n')); err != nil {
		return nil, pyException(engineTrace, "RuntimeError", err.Error())
	}
	m, err := x.next()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	out := make([]json.RawMessage, len(m.Replies))
	for i, r := range m.Replies {
		if r.ErrType != "" {
			return nil, x.failure(i, r)
		}
		out[i] = r.Result
	}
	return out, nil
}

// failure renders a worker failure as the driver's ray.get raises it
// (vllm/v1/executor/ray_executor.py _run_workers).
func (x *realRayExecutor) failure(rank int, r Reply) *engineError {
	lines := append([]string(nil), engineTrace...)
	lines = append(lines,
		`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_executor.py", line 497, in _run_workers`,
		"    ray_worker_outputs = ray.get(ray_worker_outputs)",
		`  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2961, in get`,
		"    raise value.as_instanceof_cause()")
	var w realRayWorker
	if rank < len(x.workers) {
		w = x.workers[rank]
	}
	if r.ErrType == "died" {
		return &engineError{Lines: append(lines, strings.Split("ray.exceptions.ActorDiedError: "+r.ErrMsg, "\n")...)}
	}
	short := r.ErrType[strings.LastIndex(r.ErrType, ".")+1:]
	lines = append(lines, fmt.Sprintf("ray.exceptions.RayTaskError(%s): ray::RayWorkerWrapper.execute_method() (pid=%d, ip=%s, actor_id=%s, repr=<vllm.v1.executor.ray_utils.RayWorkerWrapper object at 0x7f%09x>)", short, w.PID, w.IP, w.ActorID, w.PID*4096))
	for _, t := range r.Trace {
		if t != "Traceback (most recent call last):" {
			lines = append(lines, t)
		}
	}
	return &engineError{Lines: append(lines, strings.Split(r.ErrType+": "+r.ErrMsg, "\n")...)}
}

func (x *realRayExecutor) Close() {
	if x.cmd == nil {
		return
	}
	_, _ = x.stdin.Write([]byte(`{"method":"close"}` + "\n"))
	x.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- x.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = x.cmd.Process.Kill()
		<-done
	}
}

// lookPath finds name on env's PATH.
func lookPath(env sim.Env, name string) (string, error) {
	for _, dir := range filepath.SplitList(env.Get("PATH")) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New(name + ": not found")
}
