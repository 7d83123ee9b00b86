package vllm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/raylet"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// WorkerMain is a Ray worker process running vLLM's RayWorkerWrapper: it
// reads its boot record and then calls on stdin, and writes its output and
// replies, in order, on fd 3 (see raylet.WorkerLine).
func WorkerMain(ctx context.Context, p *sim.Proc) int {
	ctl := os.NewFile(3, "ctl")
	if ctl == nil {
		fmt.Fprintln(p.Stderr, "simnode: worker needs fd 3")
		return 2
	}
	var mu sync.Mutex
	enc := json.NewEncoder(ctl)
	send := func(wl raylet.WorkerLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(wl)
	}
	stream := func(name string) io.Writer {
		return &lineWriter{emit: func(s string) { send(raylet.WorkerLine{Stream: name, Line: s}) }}
	}
	rd := bufio.NewReaderSize(p.Stdin, 1<<20)
	line, err := rd.ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(p.Stderr, "simnode: worker boot:", err)
		return 2
	}
	var boot raylet.Boot
	if err := json.Unmarshal(line, &boot); err != nil {
		fmt.Fprintln(p.Stderr, "simnode: worker boot:", err)
		return 2
	}
	var spec WorkerSpec
	if err := json.Unmarshal(boot.Spec, &spec); err != nil {
		fmt.Fprintln(p.Stderr, "simnode: worker spec:", err)
		return 2
	}
	h, _ := hw.Load(p.Env)
	ledger := memledger.Open(p.Env)
	defer ledger.Remove(p.Pid)
	w := &Worker{Env: p.Env.Clone(), Out: stream("stdout"), Err: stream("stderr"), Now: p.Now, Pid: p.Pid, Host: p.Hostname, Spec: spec, HW: h, Ledger: ledger}
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var c Call
		if json.Unmarshal(line, &c) != nil {
			continue
		}
		r := w.Handle(ctx, c)
		b, _ := json.Marshal(r)
		send(raylet.WorkerLine{Msg: b})
	}
}
