package serve

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/diagnose"
)

// The GPU budget of a multi-node cluster: where vLLM's Ray executor gets
// each serve's GPUs, from what Ray reports free on each node.
//
// vLLM (vllm/v1/executor/ray_utils.py initialize_ray_cluster) asks Ray for
// a placement group of tensor × pipeline bundles of one GPU, strategy
// PACK, which Ray holds for the serve's whole life. With the classic Ray
// executor (RayDistributedExecutor: vLLM 0.17.1; in 0.32.0 still when the
// serve's env sets VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0) the engine runs on
// the node vllm serve runs on, the head: vLLM refuses to start when Ray
// reports no GPU free there ("Current node has no GPU available") and pins
// the first bundle to it (node:<driver ip>). Ray's PACK policy
// (src/ray/raylet/scheduling/policy/bundle_scheduling_policy.cc) schedules
// that bundle first and packs every other bundle that fits onto the same
// node, then goes on to the next best node: a serve takes as many of the
// head's free GPUs as it has bundles. RayExecutorV2 (the default from vLLM
// 0.32.0, VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1) calls it with
// require_gpu_on_driver=False: no GPU on the head, no pinned bundle.
//
// So a serve added to a cluster whose head a running serve filled fails,
// however many GPUs the workers have free; and serves started together fit
// or not depending on their order. The budget judges both from one
// function (placeServes), and apply starts the serves in the order it
// found (Work.After), so the result never depends on which started first.

// ray2Default is the first vLLM release whose Ray backend is RayExecutorV2
// by default (vllm/envs.py: VLLM_USE_RAY_V2_EXECUTOR_BACKEND defaults to
// "1" in 0.32.0; 0.17.1 has only the classic executor). Releases between
// were not read: they are judged by the classic rule, the stricter one.
const ray2Default = "0.32.0"

// gpuNode is one node of a cluster as the budget sees it: its GPUs and
// those free.
type gpuNode struct {
	Name        string
	Total, Free int
}

// placed is where Ray puts one serve's GPUs: per node (in the order of
// the budget's nodes), how many.
type placed struct {
	Serve *VLLMServe
	GPUs  []int
}

// budgetVerdict is placeServes's answer.
type budgetVerdict struct {
	// Order are the serves that fit, in the order they start.
	Order []placed
	// Failed is the first serve that does not fit (nil when all do);
	// Free are the nodes as it would find them, and Head says it fails
	// for want of a free GPU on the head (else of enough GPUs at all).
	Failed *VLLMServe
	Free   []gpuNode
	Head   bool
}

// needsHeadGPU reports whether vLLM's Ray executor for sv, in the image
// whose vLLM is version ("" when unknown), requires a free GPU on the
// head and pins its first bundle there (the classic executor).
func needsHeadGPU(sv *VLLMServe, rc *cluster.RayCluster, version string) bool {
	v2 := "1"
	if v, ok := rc.Env["VLLM_USE_RAY_V2_EXECUTOR_BACKEND"]; ok {
		v2 = v
	}
	if v, ok := sv.Env["VLLM_USE_RAY_V2_EXECUTOR_BACKEND"]; ok {
		v2 = v
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v2)); err == nil && n == 0 {
		return true
	}
	return version == "" || !diagnose.VersionAtLeast(version, ray2Default)
}

// startOrder is the order serves start in: fewest GPUs first (a serve
// takes as many of the head's free GPUs as it has bundles, so the small
// ones leave the head a GPU for the next), then by address.
func startOrder(serves []*VLLMServe) []*VLLMServe {
	out := slices.Clone(serves)
	slices.SortStableFunc(out, func(a, b *VLLMServe) int {
		return cmp.Or(cmp.Compare(serveGPUs(a), serveGPUs(b)), cmp.Compare(a.Addr, b.Addr))
	})
	return out
}

// placeServes is the one judgment of the budget: starting serves one
// after another (startOrder) on nodes (the head first) with the GPUs Ray
// reports free, where does Ray put each one's GPUs, and which is the
// first that cannot start. headGPU says, per serve, whether its executor
// needs a GPU on the head (needsHeadGPU).
func placeServes(nodes []gpuNode, serves []*VLLMServe, headGPU func(*VLLMServe) bool) budgetVerdict {
	free := slices.Clone(nodes)
	var v budgetVerdict
	for _, sv := range startOrder(serves) {
		need := serveGPUs(sv)
		total := 0
		for _, n := range free {
			total += n.Free
		}
		pinned := headGPU(sv)
		if pinned && (len(free) == 0 || free[0].Free < 1) || total < need {
			v.Failed, v.Free, v.Head = sv, free, pinned && (len(free) == 0 || free[0].Free < 1)
			return v
		}
		p := placed{Serve: sv, GPUs: make([]int, len(free))}
		// PACK: the pinned bundle's node first (the head), then the node
		// with the most GPUs free, each filled as far as it goes.
		next := func() int {
			best := -1
			for i, n := range free {
				if n.Free > 0 && p.GPUs[i] == 0 && (best < 0 || n.Free > free[best].Free) {
					best = i
				}
			}
			return best
		}
		for left := need; left > 0; {
			i := next()
			if pinned && p.GPUs[0] == 0 {
				i = 0
			}
			take := min(left, free[i].Free)
			p.GPUs[i] += take
			free[i].Free -= take
			left -= take
		}
		v.Order = append(v.Order, p)
	}
	v.Free = free
	return v
}

// clusterBudget judges a multi-node cluster's serves that this plan starts
// against the GPUs Ray reports free (placeServes); it reports the first
// that cannot start, naming the node and its GPUs, and orders apply's
// starts as judged. It runs after every serve is planned (it reads their
// actions).
func (p *planner) clusterBudget(rc *cluster.RayCluster) {
	if len(rc.Workers) == 0 || p.overBudget[rc.Name] {
		// One node: vLLM runs without Ray (deviceBudget); or the serves
		// cannot fit at all (gpuBudget said so).
		return
	}
	head := p.Host(rc.Head)
	if head == nil {
		return
	}
	var mine, start, kept, stopped []*VLLMServe
	for _, sv := range sortedServes(p.cfg) {
		if sv.Cluster != rc.Name {
			continue
		}
		mine = append(mine, sv)
		action, _ := p.Planned(sv.Addr)
		rec := ServeRecord(head, sv.Name)
		running := rec.Found && rec.Alive
		switch {
		case action == plan.Create || action == plan.Replace:
			start = append(start, sv)
			if rec.Found {
				// Its GPUs come back: a running serve stops first; one
				// whose process died may still hold them in Ray's
				// report (its placement group outlives the driver until
				// Ray notices, and the report lags), and apply replaces
				// it.
				stopped = append(stopped, sv)
			}
		case running:
			kept = append(kept, sv)
		}
	}
	if len(start) == 0 {
		return
	}
	gone := p.goneServes(rc, head)
	stopped = append(stopped, gone...)
	version := ""
	if _, known, ok := p.imageAnswer(rc, head); ok {
		version = answerOf(known).VLLM
	}
	headGPU := func(sv *VLLMServe) bool { return needsHeadGPU(sv, rc, version) }
	nodes, source := p.freeGPUs(rc, kept, stopped, headGPU)
	v := placeServes(nodes, start, headGPU)
	if v.Failed == nil {
		p.orderStarts(rc, v.Order, stopped, gone)
		return
	}
	p.Find(plan.Error, v.Failed.Addr, rc.Head, budgetSummary(v, rc, source), budgetDetail(v, kept, source, version), p.budgetFix(rc, v, mine, kept, headGPU))
}

// freeGPUs are the cluster's nodes (head first) with the GPUs free for the
// serves this plan starts: what Ray reports free (source "ray"), or, when
// Ray's report is missing, the nodes' GPUs less where the running serves
// that stay would have been placed (source "estimate"); a fresh Ray
// cluster has all free (source "fresh"). The GPUs of the serves this plan
// stops first (stopped) are added back to Ray's report: all of them when
// no serve of the cluster keeps running, else, as the report does not
// say which serve holds which, one on the head (its pinned bundle, when
// its executor pins one) and the rest on the workers as far as they have
// room, the least the head can get.
func (p *planner) freeGPUs(rc *cluster.RayCluster, kept, stopped []*VLLMServe, headGPU func(*VLLMServe) bool) ([]gpuNode, string) {
	var nodes []gpuNode
	for _, n := range rc.Nodes() {
		g := p.nodeGPUs(n)
		nodes = append(nodes, gpuNode{Name: n, Total: g, Free: g})
	}
	if a, _ := p.Planned(rc.Addr); a == plan.Create || a == plan.Replace {
		return nodes, "fresh"
	}
	usage := cluster.RayUsageOf(p.Host(rc.Head), rc)
	source := "ray"
	for i, n := range nodes {
		free, ok := usage.FreeGPUs(p.fab.Addrs[n.Name].String())
		if !ok {
			source = "estimate"
			break
		}
		nodes[i].Free = min(max(free, 0), n.Total)
	}
	switch {
	case source == "estimate":
		// The running serves that stay, placed as they would be (the
		// stopped ones, not placed, count as free).
		for i := range nodes {
			nodes[i].Free = nodes[i].Total
		}
		return placeServes(nodes, kept, headGPU).Free, source
	case len(stopped) == 0:
		return nodes, source // Ray's report as it is
	case len(kept) == 0:
		// Every serve of ours that holds GPUs stops first.
		for i := range nodes {
			nodes[i].Free = nodes[i].Total
		}
		return nodes, source
	}
	for _, sv := range stopped {
		back := serveGPUs(sv)
		if headGPU(sv) && nodes[0].Free < nodes[0].Total {
			nodes[0].Free++
			back--
		}
		for i := 1; i < len(nodes) && back > 0; i++ {
			room := min(back, nodes[i].Total-nodes[i].Free)
			nodes[i].Free += room
			back -= room
		}
		nodes[0].Free = min(nodes[0].Free+back, nodes[0].Total)
	}
	return nodes, source
}

// orderStarts makes apply start the serves in the judged order: each
// waits for the one before it, and the first for the stop of every other
// serve this plan restarts (its GPUs were counted free), when the
// cluster itself stays (when it changes, those serves are stopped ahead
// of it anyway).
func (p *planner) orderStarts(rc *cluster.RayCluster, order []placed, stopped, gone []*VLLMServe) {
	if len(order) < 2 && len(gone) == 0 {
		return
	}
	clusterStays := true
	if a, ok := p.Planned(rc.Addr); ok && a != plan.NoOp {
		clusterStays = false
	}
	first := order[0].Serve.Addr
	for i, pl := range order {
		w := p.Work(pl.Serve.Addr)
		if w == nil {
			continue
		}
		if i > 0 {
			w.After = append(w.After, order[i-1].Serve.Addr)
		}
		if i == 0 {
			for _, g := range gone {
				w.After = append(w.After, g.Addr)
			}
		}
		if sw := WorkOf(w); sw != nil && i > 0 && clusterStays && slices.Contains(stopped, pl.Serve) {
			sw.StopBefore = first
		}
	}
}

// goneServes are the serves the state remembers on rc's head that the
// configuration no longer declares and that still run: this plan removes
// them, which frees their GPUs. Only their address and parallelism (from
// their record) are known.
func (p *planner) goneServes(rc *cluster.RayCluster, head *observe.HostFacts) []*VLLMServe {
	st := p.State()
	if st == nil {
		return nil
	}
	var out []*VLLMServe
	for _, addr := range st.Addresses() {
		a := plan.ParseAddress(addr)
		if a.Type != Type || serveAt(p.cfg, addr) != nil {
			continue
		}
		if r, _ := st.Get(addr); r.Container != cluster.ContainerName(rc) {
			continue
		}
		rec := ServeRecord(head, a.Instance())
		if !rec.Found || !rec.Alive {
			continue
		}
		sv := &VLLMServe{Decl: config.Decl{Addr: addr}, Name: a.Instance(), Cluster: rc.Name}
		sv.TensorParallelSize, _ = strconv.Atoi(rec.Attrs["tensor_parallel_size"])
		sv.PipelineParallelSize, _ = strconv.Atoi(rec.Attrs["pipeline_parallel_size"])
		out = append(out, sv)
	}
	return out
}

// budgetSummary says which serve cannot start and why, naming the node;
// source is freeGPUs's.
func budgetSummary(v budgetVerdict, rc *cluster.RayCluster, source string) string {
	need := serveGPUs(v.Failed)
	has := "Ray has"
	if source == "fresh" {
		has = "the serves started before it leave"
	}
	if v.Head {
		h := v.Free[0]
		return fmt.Sprintf("%s cannot start: its engine needs a free GPU on the head %s, and %s %d of its %d GPUs free", v.Failed.Addr, h.Name, has, h.Free, h.Total)
	}
	free := 0
	for _, n := range v.Free {
		free += n.Free
	}
	return fmt.Sprintf("%s needs %d GPUs, but %s %d free on %s", v.Failed.Addr, need, has, free, rc.Addr)
}

// budgetDetail says where the GPUs are, and the rule.
func budgetDetail(v budgetVerdict, kept []*VLLMServe, source, version string) string {
	var nodes []string
	for _, n := range v.Free {
		nodes = append(nodes, fmt.Sprintf("%s %d of %d", n.Name, n.Free, n.Total))
	}
	var b strings.Builder
	switch source {
	case "ray":
		b.WriteString("GPUs free as Ray reports them (ray status)")
	case "estimate":
		b.WriteString("GPUs free, estimated (Ray's dashboard did not report its nodes' usage)")
	default:
		b.WriteString("GPUs free, the serves started smallest first on the idle cluster,")
	}
	if len(v.Order) > 0 {
		var before []string
		for _, pl := range v.Order {
			before = append(before, fmt.Sprintf("%s (%d)", pl.Serve.Addr, serveGPUs(pl.Serve)))
		}
		b.WriteString(" once " + strings.Join(before, ", ") + " started")
	}
	b.WriteString(": " + strings.Join(nodes, ", ") + ".")
	if len(kept) > 0 {
		var held []string
		for _, sv := range kept {
			held = append(held, fmt.Sprintf("%s (%d)", sv.Addr, serveGPUs(sv)))
		}
		b.WriteString(" Running serves hold theirs for their whole life: " + strings.Join(held, ", ") + ".")
	}
	if v.Head {
		b.WriteString(" vLLM's classic Ray executor")
		if version != "" {
			b.WriteString(" (vLLM " + version + " in the image)")
		} else {
			b.WriteString(" (the image's vLLM version is unknown: judged by the stricter, classic rule)")
		}
		b.WriteString(" runs the engine on the head and refuses to start without a free GPU there (\"Current node has no GPU available\"); its placement group pins the first bundle to the head and Ray packs the others onto the head as far as they fit, so a serve takes as many of the head's free GPUs as it has bundles.")
	} else {
		b.WriteString(" vLLM would wait for a placement group that Ray can never create.")
	}
	return b.String()
}

// budgetFix is what would make the serves fit: when they all fit started
// together (in startOrder, on an empty cluster), restarting the running
// ones with this plan; else fewer GPUs or more.
func (p *planner) budgetFix(rc *cluster.RayCluster, v budgetVerdict, mine, kept []*VLLMServe, headGPU func(*VLLMServe) bool) string {
	var nodes []gpuNode
	for _, n := range rc.Nodes() {
		g := p.nodeGPUs(n)
		nodes = append(nodes, gpuNode{Name: n, Total: g, Free: g})
	}
	if len(kept) > 0 && placeServes(nodes, mine, headGPU).Failed == nil {
		var replace, order []string
		for _, sv := range kept {
			replace = append(replace, "-replace="+sv.Addr)
		}
		for _, sv := range startOrder(mine) {
			order = append(order, sv.Addr)
		}
		return fmt.Sprintf("apply with %s: rayform then restarts it and starts the serves smallest first (%s), so all fit", strings.Join(replace, " "), strings.Join(order, ", "))
	}
	if v.Head {
		return fmt.Sprintf("lower the parallelism of %s or of a serve before it, remove a serve, or give the head %s more GPUs", v.Failed.Addr, rc.Head)
	}
	return "lower the parallelism of " + v.Failed.Addr + ", remove a serve, or add nodes to " + rc.Addr
}
