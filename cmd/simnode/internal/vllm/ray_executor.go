package vllm

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/netx"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/raycli"
	"github.com/rayform/rayform/cmd/simnode/internal/raylet"
	"github.com/rayform/rayform/cmd/simnode/internal/raystate"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/cmd/simnode/internal/wire"
)

type rayActor struct {
	info    gcs.ActorInfo
	ip      string // get_ip() reported by the worker
	mu      sync.Mutex
	seq     int
	pending map[int]chan Reply
	died    *gcs.ActorEvent
}

// rayExecutor is vLLM's RayDistributedExecutor: it connects to the Ray
// cluster as a driver, creates a placement group anchored on
// node:<driver ip>, starts one RayWorkerWrapper per bundle on the bundle's
// node and drives them through the GCS.
type rayExecutor struct {
	p     *sim.Proc
	core  *plog
	h     *hw.Hardware
	tm    *hw.Timing
	spec  WorkerSpec
	world int
	tp    int

	client    *gcs.Client
	stopLocal context.CancelFunc
	driverIP  string
	nodeID    string
	actors    []*rayActor
	mu        sync.Mutex
	byID      map[string]*rayActor
	workerLog *plog
}

func newRayExecutor(p *sim.Proc, core *plog, h *hw.Hardware, tm *hw.Timing, spec WorkerSpec, world, tp int) *rayExecutor {
	return &rayExecutor{p: p, core: core, h: h, tm: tm, spec: spec, world: world, tp: tp, byID: map[string]*rayActor{}}
}

func (x *rayExecutor) WorldSize() int   { return x.world }
func (x *rayExecutor) DriverIP() string { return x.driverIP }

// engineTrace is the engine core's side of a failed initialization.
var engineTrace = []string{
	"Traceback (most recent call last):",
	`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 834, in run_engine_core`,
	"    engine_core = EngineCoreProc(*args, **kwargs)",
	`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 610, in __init__`,
	"    super().__init__(",
	`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 102, in __init__`,
	"    self.model_executor = executor_class(vllm_config)",
	`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/abstract.py", line 101, in __init__`,
	"    self._init_executor()",
	`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_executor.py", line 97, in _init_executor`,
	"    initialize_ray_cluster(self.parallel_config)",
}

func (x *rayExecutor) handle(ctx context.Context, c *wire.Conn, m *wire.Msg) (any, error) {
	switch m.Op {
	case "log":
		var l gcs.LogLine
		if m.Decode(&l) == nil {
			x.core.RawErr("(raylet) " + l.Line)
		}
	case "actor_event":
		var ev gcs.ActorEvent
		if err := m.Decode(&ev); err != nil {
			return nil, nil
		}
		x.mu.Lock()
		a := x.byID[ev.ActorID]
		x.mu.Unlock()
		if a == nil {
			return nil, nil
		}
		switch ev.Kind {
		case gcs.EventLog:
			l := x.core.with(fmt.Sprintf("(RayWorkerWrapper pid=%d, ip=%s) ", ev.PID, ev.NodeIP))
			if ev.Stream == "stderr" {
				l.RawErr(ev.Line)
			} else {
				l.Raw(ev.Line)
			}
		case gcs.EventMsg:
			var r Reply
			if json.Unmarshal(ev.Data, &r) != nil {
				return nil, nil
			}
			a.mu.Lock()
			ch := a.pending[r.Seq]
			delete(a.pending, r.Seq)
			a.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		case gcs.EventDied:
			a.mu.Lock()
			a.died = &ev
			for seq, ch := range a.pending {
				close(ch)
				delete(a.pending, seq)
			}
			a.mu.Unlock()
		}
	}
	return nil, nil
}

func (x *rayExecutor) rayInstalled() error {
	path := x.p.Env.Get("PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, "ray")); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return nil
		}
	}
	return &engineError{Lines: append(append([]string(nil), engineTrace...), "ValueError: Failed to import Ray: No module named 'ray'.Please install Ray with `pip install ray`.")}
}

// startLocalRay is ray.init() without a cluster: a head node in-process.
func (x *rayExecutor) startLocalRay(ctx context.Context) (string, error) {
	ip := netx.RayNodeIP(ctx, "8.8.8.8:53", x.p.Hostname)
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		return "", err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	x.stopLocal = cancel
	srv := gcs.NewServer(gcs.Options{SessionName: fmt.Sprintf("session_%s_%d", x.p.Now().Format("2006-01-02_15-04-05"), x.p.Pid), HeartbeatTimeout: x.tm.Get("heartbeat_timeout"), Now: x.p.Now})
	go func() { _ = srv.Serve(lctx, ln) }()
	addr := net.JoinHostPort(ip, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
	res := raycli.NodeResources(x.h, raycli.ResourceOptions{CPUs: -1, GPUs: -1, ObjectStore: -1, Memory: -1}, ip, true, nil)
	r, err := raylet.Start(lctx, raylet.Config{GCSAddr: addr, Node: gcs.NodeInfo{NodeIP: ip, NodeName: ip, IsHead: true, Resources: res, Hostname: x.p.Hostname},
		Env: x.p.Env, Exe: x.p.Exe, Timing: x.tm, HW: x.h, Ledger: memledger.Open(x.p.Env), Now: x.p.Now, Pid: x.p.Pid})
	if err != nil {
		cancel()
		return "", err
	}
	go func() { _ = r.Run(lctx) }()
	x.core.Ray("INFO", "worker.py:2012", "Started a local Ray instance.")
	return addr, nil
}

func (x *rayExecutor) Start(ctx context.Context) error {
	if err := x.rayInstalled(); err != nil {
		return err
	}
	addr := raycli.FindAddress(x.p.Env, "")
	if addr == "" {
		a, err := x.startLocalRay(ctx)
		if err != nil {
			return pyException(engineTrace, "RuntimeError", err.Error())
		}
		addr = a
	} else {
		x.core.Ray("INFO", "worker.py:1660", "Connecting to existing Ray cluster at address: "+addr+"...")
	}
	sink := &lineWriter{emit: x.core.RawErr}
	pp := *x.p
	pp.Stderr = sink
	c, err := raycli.ConnectGCS(ctx, &pp, addr, x.tm, gcs.Hello{Role: "driver"}, x.handle)
	if err != nil {
		return pyException(engineTrace, "ConnectionError", fmt.Sprintf("Could not read 'session_name' from GCS. Did GCS start successfully?"))
	}
	x.client = c
	x.core.Ray("INFO", "worker.py:1832", "Connected to Ray cluster.")

	st, err := c.Status(ctx)
	if err != nil {
		return pyException(engineTrace, "RuntimeError", err.Error())
	}
	// The driver attaches to the raylet of its own node.
	ifaces, _ := netx.Interfaces()
	local := map[string]bool{}
	for _, i := range ifaces {
		for _, a := range i.IPv4 {
			local[a.String()] = true
		}
	}
	var self *gcs.NodeInfo
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if n.State == gcs.Alive && local[n.NodeIP] {
			self = n
			break
		}
	}
	if self == nil {
		myIP := netx.RayNodeIP(ctx, addr, x.p.Hostname)
		return pyException(engineTrace, "RuntimeError", fmt.Sprintf("This node has an IP address of %s, while we can not find the matched Raylet address. This maybe come from when you connect the Ray cluster with a different IP address or connect a container.", myIP))
	}
	x.nodeID = self.NodeID

	x.driverIP = GetIP(ctx, x.p.Env, &lineWriter{emit: x.core.Raw}, x.p.Now)
	clusterGPUs := 0.0
	for _, n := range st.Nodes {
		if n.State == gcs.Alive {
			clusterGPUs += n.Resources["GPU"]
		}
	}
	x.core.Info("ray_utils.py:391", "No current placement group found. Creating a new placement group.")
	if float64(x.world) > clusterGPUs {
		x.core.Warn("ray_utils.py:399", "The number of required GPUs exceeds the total number of available GPUs in the placement group.")
	}
	if self.Available["GPU"] < 1 {
		return pyException(engineTrace, "ValueError", fmt.Sprintf("Current node has no GPU available. current_node_resource=%s. vLLM engine cannot start without GPU. Make sure you have at least 1 GPU available in a node current_node_id='%s' current_ip='%s'.", pylog.Repr(self.Available), self.NodeID, x.driverIP))
	}
	bundles := make([]map[string]float64, x.world)
	for i := range bundles {
		bundles[i] = map[string]float64{"GPU": 1}
	}
	bundles[0]["node:"+x.driverIP] = 0.001
	if err := x.placementGroup(ctx, bundles); err != nil {
		return err
	}
	return nil
}

func specsRepr(bundles []map[string]float64) string {
	parts := make([]string, len(bundles))
	for i, b := range bundles {
		parts[i] = raystate.BundleRepr(b)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (x *rayExecutor) placementGroup(ctx context.Context, bundles []map[string]float64) error {
	var pg gcs.PGState
	if err := x.client.Conn.Call(ctx, "create_pg", gcs.PGRequest{Bundles: bundles, Strategy: "PACK"}, &pg); err != nil {
		return pyException(engineTrace, "RuntimeError", err.Error())
	}
	timeout := x.tm.Get("placement_group_timeout")
	interval := x.tm.Get("placement_group_wait_interval")
	start := time.Now()
	var state gcs.PGState
	for time.Since(start) < timeout {
		wait := min(interval, timeout-time.Since(start))
		if err := x.client.Conn.Call(ctx, "wait_pg", gcs.PGWait{ID: pg.ID, TimeoutMs: wait.Milliseconds()}, &state); err != nil {
			return pyException(engineTrace, "RuntimeError", err.Error())
		}
		if state.Ready {
			break
		}
		interval *= 2
		x.core.Info("ray_utils.py:256", "Waiting for creating a placement group of specs for %d seconds. specs=%s. Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node.", int(time.Since(start).Seconds()), specsRepr(bundles))
	}
	trace := append(append([]string(nil), engineTrace...),
		`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_utils.py", line 424, in initialize_ray_cluster`,
		"    _wait_until_pg_ready(current_placement_group)",
		`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_utils.py", line 276, in _wait_until_pg_ready`,
		"    raise ValueError(")
	if !state.Ready {
		secs := int(timeout.Seconds())
		if x.world > 1 {
			return pyException(trace, "ValueError", fmt.Sprintf("Cannot provide a placement group requiring %s GPUs (placement_group_specs=%s) within %d seconds.\nTensor parallel size may exceed available GPUs in your cluster. Check resources with `ray status` and `ray list nodes`.\nIf running on K8s with limited GPUs, consider reducing --tensor-parallel-size to match available GPU resources.", pylog.PyFloat(float64(x.world)), specsRepr(bundles), secs))
		}
		return pyException(trace, "ValueError", fmt.Sprintf("Cannot provide a placement group of placement_group_specs=%s within %d seconds. See `ray status` and `ray list nodes` to make sure the cluster has enough resources.", specsRepr(bundles), secs))
	}
	perNode := map[string]int{}
	for _, n := range state.BundleNodes {
		perNode[n]++
	}
	if perNode[x.nodeID] == 0 {
		return pyException(engineTrace, "RuntimeError", fmt.Sprintf("driver node id %s is not included in a placement group %s. Node id -> bundles %v. You don't have enough GPUs available in a current node. Check `ray status` and `ray list nodes` to see if you have available GPUs in a node `{driver_node_id}` before starting an vLLM engine.", x.nodeID, pg.ID, perNode))
	}
	warned := map[string]bool{}
	for _, nid := range state.BundleNodes {
		if perNode[nid] < x.tp && !warned[nid] {
			warned[nid] = true
			x.core.Warn("ray_utils.py:208", "tensor_parallel_size=%d is bigger than a reserved number of GPUs (%d GPUs) in a node %s. Tensor parallel workers can be spread out to 2+ nodes which can degrade the performance unless you have fast interconnect across nodes, like Infiniband. To resolve this issue, make sure you have more than %d GPUs available at each node.", x.tp, perNode[nid], nid, x.tp)
		}
	}
	return x.createWorkers(ctx, pg.ID, len(bundles))
}

func (x *rayExecutor) createWorkers(ctx context.Context, pgID string, n int) error {
	spec, _ := json.Marshal(x.spec)
	for i := 0; i < n; i++ {
		var info gcs.ActorInfo
		if err := x.client.Conn.Call(ctx, "create_actor", gcs.ActorRequest{PG: pgID, BundleIndex: i, ClassName: "RayWorkerWrapper", Spec: spec}, &info); err != nil {
			return pyException(engineTrace, "RuntimeError", err.Error())
		}
		a := &rayActor{info: info, pending: map[int]chan Reply{}}
		x.mu.Lock()
		x.byID[info.ActorID] = a
		x.mu.Unlock()
		x.actors = append(x.actors, a)
	}
	// get_node_ip, then order: driver's node first, then by IP.
	ips, err := x.collectiveActors(ctx, x.actors, "get_node_ip", nil)
	if err != nil {
		return err
	}
	for i, raw := range ips {
		_ = json.Unmarshal(raw, &x.actors[i].ip)
	}
	sort.SliceStable(x.actors, func(i, j int) bool {
		ai, aj := x.actors[i].info.NodeID == x.nodeID, x.actors[j].info.NodeID == x.nodeID
		if ai != aj {
			return ai
		}
		return x.actors[i].ip < x.actors[j].ip
	})
	nodes := map[string]bool{}
	allIPs := map[string]bool{x.driverIP: true}
	var nodeIDs []string
	for _, a := range x.actors {
		if !nodes[a.info.NodeID] {
			nodeIDs = append(nodeIDs, a.info.NodeID)
		}
		nodes[a.info.NodeID] = true
		allIPs[a.ip] = true
	}
	if len(nodes) != len(allIPs) {
		ips := make([]string, 0, len(allIPs))
		for ip := range allIPs {
			ips = append(ips, ip)
		}
		sort.Strings(ips)
		return pyException(engineTrace, "RuntimeError", fmt.Sprintf("Every node should have a unique IP address. Got %d nodes with node ids %s and %d unique IP addresses %s. Please check your network configuration. If you set `VLLM_HOST_IP` environment variable, make sure it is unique for each node.", len(nodes), pylog.Repr(nodeIDs), len(allIPs), pyset(ips)))
	}
	vars := envToCopy(x.p.Env, x.core)
	if _, err := x.Collective(ctx, "update_environment_variables", func(int) any { return vars }); err != nil {
		return err
	}
	return nil
}

func (x *rayExecutor) call(ctx context.Context, a *rayActor, method string, args any) Reply {
	var raw json.RawMessage
	if args != nil {
		raw, _ = json.Marshal(args)
	}
	a.mu.Lock()
	if a.died != nil {
		a.mu.Unlock()
		return Reply{ErrType: "died"}
	}
	a.seq++
	seq := a.seq
	ch := make(chan Reply, 1)
	a.pending[seq] = ch
	a.mu.Unlock()
	data, _ := json.Marshal(Call{Seq: seq, Method: method, Args: raw})
	if err := x.client.Conn.Send("actor_msg", gcs.ActorMsg{ActorID: a.info.ActorID, Data: data}); err != nil {
		return Reply{ErrType: "RuntimeError", ErrMsg: err.Error()}
	}
	select {
	case <-ctx.Done():
		return Reply{ErrType: "KeyboardInterrupt", ErrMsg: ""}
	case r, ok := <-ch:
		if !ok {
			return Reply{ErrType: "died"}
		}
		return r
	}
}

// failure renders a worker failure as the driver's ray.get raises it.
func (x *rayExecutor) failure(a *rayActor, r Reply) *engineError {
	lines := append([]string(nil), engineTrace...)
	lines = append(lines,
		`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_executor.py", line 497, in _run_workers`,
		"    ray_worker_outputs = ray.get(ray_worker_outputs)",
		`  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2961, in get`,
		"    raise value.as_instanceof_cause()")
	if r.ErrType == "died" {
		a.mu.Lock()
		ev := a.died
		a.mu.Unlock()
		if ev == nil {
			ev = &gcs.ActorEvent{ExitType: "SYSTEM_ERROR", ExitDetail: "unknown"}
		}
		if ev.ExitType == "NODE_OUT_OF_MEMORY" {
			return &engineError{Lines: append(lines, strings.Split("ray.exceptions.OutOfMemoryError: "+ev.ExitDetail, "\n")...)}
		}
		msg := fmt.Sprintf("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: RayWorkerWrapper\n\tactor_id: %s\n\tpid: %d\n\tnamespace: %s\n\tip: %s\nThe actor is dead because its worker process has died. Worker exit type: %s Worker exit detail: %s", a.info.ActorID, a.info.PID, "3c6e1c33-5d45-4ad1-9a1c-9a6c0c1f3e31", a.info.NodeIP, ev.ExitType, ev.ExitDetail)
		return &engineError{Lines: append(lines, strings.Split(msg, "\n")...)}
	}
	short := r.ErrType[strings.LastIndex(r.ErrType, ".")+1:]
	lines = append(lines, fmt.Sprintf("ray.exceptions.RayTaskError(%s): ray::RayWorkerWrapper.execute_method() (pid=%d, ip=%s, actor_id=%s, repr=<vllm.v1.executor.ray_utils.RayWorkerWrapper object at 0x7f%09x>)", short, a.info.PID, a.info.NodeIP, a.info.ActorID, a.info.PID*4096))
	for _, t := range r.Trace {
		if t != "Traceback (most recent call last):" {
			lines = append(lines, t)
		}
	}
	return &engineError{Lines: append(lines, strings.Split(r.ErrType+": "+r.ErrMsg, "\n")...)}
}

func (x *rayExecutor) collectiveActors(ctx context.Context, actors []*rayActor, method string, args func(int) any) ([]json.RawMessage, error) {
	replies := make([]Reply, len(actors))
	var wg sync.WaitGroup
	for i, a := range actors {
		var arg any
		if args != nil {
			arg = args(i)
		}
		wg.Add(1)
		go func(i int, a *rayActor) {
			defer wg.Done()
			replies[i] = x.call(ctx, a, method, arg)
		}(i, a)
	}
	wg.Wait()
	out := make([]json.RawMessage, len(replies))
	for i, r := range replies {
		if r.ErrType != "" {
			return nil, x.failure(actors[i], r)
		}
		out[i] = r.Result
	}
	return out, nil
}

func (x *rayExecutor) Collective(ctx context.Context, method string, args func(int) any) ([]json.RawMessage, error) {
	return x.collectiveActors(ctx, x.actors, method, args)
}

func (x *rayExecutor) Close() {
	if x.client != nil {
		x.client.Close()
	}
	if x.stopLocal != nil {
		x.stopLocal()
	}
}
