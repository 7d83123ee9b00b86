package vllm

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// engineError is a failure during engine initialization: the exception as
// the engine core prints it (traceback lines, then "Type: message").
type engineError struct {
	Lines []string
}

func (e *engineError) Error() string { return strings.Join(e.Lines, "\n") }

func pyException(trace []string, typ, msg string) *engineError {
	lines := append([]string(nil), trace...)
	lines = append(lines, strings.Split(typ+": "+msg, "\n")...)
	return &engineError{Lines: lines}
}

// executor runs the engine's workers.
type executor interface {
	// Start creates the workers.
	Start(ctx context.Context) error
	// Collective runs method on every worker (args(rank) as its argument)
	// and returns the results in rank order, or the first failure.
	Collective(ctx context.Context, method string, args func(rank int) any) ([]json.RawMessage, error)
	// WorldSize is the number of workers.
	WorldSize() int
	// DriverIP is the c10d master address.
	DriverIP() string
	Close()
}

// getOpenPort is vLLM's get_open_port: VLLM_PORT, else a free port.
func getOpenPort(env sim.Env) int {
	if v := env.Get("VLLM_PORT"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 29500
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// localExecutor runs the workers in this process (backends uni and mp).
type localExecutor struct {
	workers []*Worker
	mp      bool
}

func newLocalExecutor(p *sim.Proc, core *plog, h *hw.Hardware, spec WorkerSpec, world int, mp bool) *localExecutor {
	ex := &localExecutor{mp: mp}
	for r := 0; r < world; r++ {
		l := core
		if mp {
			l = core.with(fmt.Sprintf("(Worker_TP%d pid=%d) ", r, p.Pid))
		}
		w := &Worker{
			Env: p.Env.Clone(), Now: p.Now, Pid: p.Pid, Host: p.Hostname, Slot: r, Spec: spec, HW: h, Ledger: memledger.Open(p.Env),
			Out: &lineWriter{emit: l.Raw}, Err: &lineWriter{emit: l.RawErr},
		}
		w.Env["CUDA_VISIBLE_DEVICES"] = strconv.Itoa(r)
		ex.workers = append(ex.workers, w)
	}
	return ex
}

func (x *localExecutor) Start(ctx context.Context) error { return nil }
func (x *localExecutor) WorldSize() int                  { return len(x.workers) }
func (x *localExecutor) DriverIP() string                { return "127.0.0.1" }

func (x *localExecutor) Collective(ctx context.Context, method string, args func(int) any) ([]json.RawMessage, error) {
	replies := make([]Reply, len(x.workers))
	var wg sync.WaitGroup
	for i, w := range x.workers {
		var raw json.RawMessage
		if args != nil {
			raw, _ = json.Marshal(args(i))
		}
		wg.Add(1)
		go func(i int, w *Worker) {
			defer wg.Done()
			replies[i] = w.Handle(ctx, Call{Seq: 1, Method: method, Args: raw})
		}(i, w)
	}
	wg.Wait()
	out := make([]json.RawMessage, len(replies))
	for i, r := range replies {
		if r.ErrType != "" {
			return nil, pyException(r.Trace, r.ErrType, r.ErrMsg)
		}
		out[i] = r.Result
	}
	return out, nil
}

func (x *localExecutor) Close() {
	for _, w := range x.workers {
		w.Handle(context.Background(), Call{Method: "shutdown"})
		w.Ledger.Remove(w.Pid)
	}
}
