package serve

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/attrs"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/hostplan"
)

// memoryHeadroomLimit is the share of memory below Ray's kill threshold
// that vLLM must leave on unified memory, for the OS, Ray itself and CUDA
// graph capture: less than this is an error, not a warning.
const memoryHeadroomLimit = 0.10

// rayDefaultMemoryThreshold is Ray's RAY_memory_usage_threshold default.
const rayDefaultMemoryThreshold = 0.95

// serveSeen is what the head's probe says of a serve: its process record,
// vLLM's answer on its port, and the record of a start rayform saw fail.
type serveSeen struct {
	head      *observe.HostFacts
	rec       observe.ProcessRecord
	answer    VLLM
	failed    FailedStart
	hasFailed bool
}

// serveVerdict is a serve's action and why: the configuration's changes
// (reasons) and what changed outside rayform (drift).
type serveVerdict struct {
	action         plan.Action
	reasons, drift []string
}

func (v *serveVerdict) because(a plan.Action, reason string) {
	v.action = a
	v.reasons = append(v.reasons, reason)
}

func (v *serveVerdict) drifted(a plan.Action, why string) {
	v.action = a
	v.drift = append(v.drift, why)
}

// serve plans one vllm_serve: its findings, its action against what its
// head runs, and its work.
func (p *planner) serve(sv *VLLMServe) {
	rc := p.cfg.RayClusters[sv.Cluster]
	if rc == nil {
		return
	}
	spec, err := ServeSpecFor(p.cfg, sv)
	if err != nil {
		p.Find(plan.Error, sv.Addr, "", err.Error(), "", "")
		return
	}
	p.capacity(sv, rc)
	p.memoryMonitor(sv, rc)
	p.exposure(sv, rc)
	head := p.Host(rc.Head)
	p.extraArgsPlan(sv, rc, head)
	seen := serveSeen{head: head, rec: ServeRecord(head, sv.Name), answer: ServeAnswer(head, sv.Port)}
	seen.failed, seen.hasFailed = FailedStartOf(head, spec, p.Project())
	v := p.serveAction(sv, rc, spec, seen)
	p.planServe(sv, rc, spec, seen, v)
}

// serveAction judges the serve against its cluster's action and what its
// head runs.
func (p *planner) serveAction(sv *VLLMServe, rc *cluster.RayCluster, spec ServeSpec, seen serveSeen) serveVerdict {
	v := serveVerdict{action: plan.NoOp}
	clusterAction, _ := p.Planned(rc.Addr)
	rec := seen.rec
	switch {
	case seen.head == nil:
		// Unobservable head: a finding already says so.
	case clusterAction == plan.Create:
		v.action = plan.Create
	case clusterAction == plan.Replace:
		v.action = plan.Create
		if rec.Found {
			v.because(plan.Replace, "its Ray cluster is replaced")
		}
	case p.Replace(sv.Addr) && rec.Found:
		v.because(plan.Replace, "replacement requested with -replace")
	case !rec.Found:
		v.action = plan.Create
		if p.StateHas(sv.Addr) {
			v.drifted(plan.Create, "the serve process record is gone (container recreated outside rayform)")
		}
	case !serveCurrent(spec, rec.SpecHash) && !unknownOnly(sv, spec, rec):
		v.because(plan.Replace, "the serve arguments changed")
	case clusterAction == plan.Update:
		// A container of a node it spans is restarted or removed: on
		// real vLLM the serve's workers die with it, so the serve is
		// replaced too (apply stops it before the cluster changes).
		v.because(plan.Replace, "its Ray cluster restarts or removes a node it spans ("+strings.Join(kind.Restarts(p.Work(rc.Addr)), ", ")+")")
	default:
		p.judgeHealth(sv, rc, spec, seen, &v)
	}
	return v
}

// judgeHealth judges a current serve by its health: one that is down,
// hung, unhealthy or serves another model is replaced; a port held by
// another process is an error, a serve still starting a warning.
func (p *planner) judgeHealth(sv *VLLMServe, rc *cluster.RayCluster, spec ServeSpec, seen serveSeen, v *serveVerdict) {
	addr := sv.Addr
	switch h := JudgeServe(seen.rec, seen.answer, spec); h.State {
	case HealthDown:
		if seen.hasFailed && seen.failed.SpecHash == seen.rec.SpecHash {
			// rayform's own start failed: not a change outside it.
			v.because(plan.Replace, "rayform's start of it failed at "+seen.failed.At.Format(time.DateTime)+": "+seen.failed.Cause)
		} else {
			v.drifted(plan.Replace, h.Detail)
		}
	case HealthHung, HealthUnhealthy, HealthWrongModel:
		v.drifted(plan.Replace, h.Detail)
	case HealthPortHeld:
		// The serve runs, but another process holds its port: it can
		// never bind it. observe did not send that process a request.
		p.Find(plan.Error, addr, rc.Head, fmt.Sprintf("port %d on %s is held by %s, not by %s's serve", sv.Port, rc.Head, seen.answer.Health.HeldBy, addr),
			fmt.Sprintf("The vllm serve process of %s runs in %s, but the process listening on port %d is not one of that container's, so vLLM cannot bind its port. rayform sent it no request.", addr, spec.Container, sv.Port),
			fmt.Sprintf("stop what holds port %d, or set port = <a free port> on %s", sv.Port, addr))
	case HealthStarting:
		p.Find(plan.Warning, addr, rc.Head, "vLLM is still starting (its port is closed)", "The serve process runs; weights may still be loading.", "wait, or follow the log: docker exec "+spec.Container+" tail -f "+spec.LogPath())
	}
}

// planServe hands the serve's findings, drift, change and work to the
// plan, once its action v is known.
func (p *planner) planServe(sv *VLLMServe, rc *cluster.RayCluster, spec ServeSpec, seen serveSeen, v serveVerdict) {
	addr, action, rec := sv.Addr, v.action, seen.rec
	// The port must be free unless this serve's own process, running,
	// holds it: its record says it listens there (a record without
	// attributes, of an older rayform, is taken to).
	recPort, recorded := rec.Attrs["port"]
	ownPort := rec.Found && rec.Alive && (!recorded || recPort == strconv.Itoa(sv.Port))
	attrs := serveAttrs(sv, spec, action, rec)
	newModel := slices.ContainsFunc(attrs, func(c plan.AttrChange) bool { return c.Name == "model" && c.Changed() })
	arch, later := p.preflight(sv, rc, action, rec.Found && rec.Alive, newModel)
	if action != plan.NoOp && seen.head != nil && !ownPort {
		p.PortsFree(addr, rc.Head, "The vllm serve of "+addr, frontContainer(seen.head, spec), []hostplan.PortUse{{Port: sv.Port, Attr: "port"}})
	}
	if len(v.drift) > 0 {
		p.Drift(plan.Drift{Address: addr, Host: rc.Head, Summary: strings.Join(v.drift, "; ")})
	}
	if action != plan.NoOp && seen.hasFailed && seen.failed.SpecHash == spec.Hash() {
		p.failedBefore(sv, spec, rec, seen.failed)
	}
	blueGreen := false
	if action == plan.Replace && rec.Found && rec.Alive {
		var nodes []gpuNode
		if nodes, blueGreen = p.blueGreen(sv, rc); blueGreen {
			v.reasons = append(v.reasons, blueGreenReason(nodes))
		} else {
			v.reasons = append(v.reasons, p.downtime(sv, rc, seen.head, spec))
		}
	}
	p.Change(plan.ResourceChange{Address: addr, Type: Type, Name: sv.Name, Action: action,
		Hosts: []string{rc.Head}, Reasons: append(v.drift, v.reasons...), Attrs: attrs})
	if action != plan.NoOp {
		p.AddWork(&kind.Work{Address: addr, Type: Type, Action: action, Hosts: []string{rc.Head},
			Do: &ServeWork{Spec: spec, Stop: (rec.Found || action == plan.Replace) && !blueGreen, BlueGreen: blueGreen, Start: true, HeadIP: p.fab.Addrs[rc.Head], ReadyTimeout: sv.ReadyTimeout,
				Check: serveCheck(p.cfg, rc, p.fab.Addrs, p.fab.Ifaces), Arch: arch, Model: later, Cluster: rc.Addr, ClusterNodes: rc.Nodes()}})
	}
}

// The states of a serve's health (ServeHealth.State).
const (
	HealthOK         = "ok"
	HealthDown       = "down"        // no serve process runs
	HealthFailed     = "failed"      // rayform's start of it failed
	HealthPortHeld   = "port held"   // another process holds its port
	HealthHung       = "hung"        // the port is open, /health does not answer
	HealthStarting   = "starting"    // the process runs, its port is closed
	HealthUnhealthy  = "unhealthy"   // /health answers other than 200
	HealthWrongModel = "wrong model" // /v1/models lists another model or length
)

// ServeHealth is the judgment of a serve from what the head's probe read.
type ServeHealth struct {
	State  string // one of the Health constants
	Detail string // why, in words
}

// JudgeServe is the one judgment of a serve's health, for plan (which
// replaces a serve that is down, hung, unhealthy or serves the wrong
// model, and waits for one starting) and for status: the record says
// whether the process runs, its own port's answers say how it serves.
func JudgeServe(rec observe.ProcessRecord, v VLLM, spec ServeSpec) ServeHealth {
	h := v.Health
	switch {
	case !rec.Found || !rec.Alive:
		return ServeHealth{HealthDown, "the vllm serve process is not running"}
	case h.HeldBy != "":
		return ServeHealth{HealthPortHeld, fmt.Sprintf("port %d is held by %s, not by the serve", spec.Port, h.HeldBy)}
	case h.TimedOut:
		// The port is open (weights are loaded: vLLM opens it last) but
		// nothing answers: hung, not starting.
		return ServeHealth{HealthHung, "vLLM /health did not answer within 2s: the vllm serve process runs but is hung"}
	case h.Refused || h.Status == 0:
		return ServeHealth{HealthStarting, "the process runs, its port is not open yet"}
	case h.Status != 200:
		return ServeHealth{HealthUnhealthy, fmt.Sprintf("vLLM /health answers %d", h.Status)}
	}
	if d := modelsDrift(v, spec); d != "" {
		return ServeHealth{HealthWrongModel, d}
	}
	return ServeHealth{HealthOK, "/health 200"}
}

// modelsDrift judges the /v1/models list observe read (judgeModels); ""
// when it did not read one.
func modelsDrift(v VLLM, spec ServeSpec) string {
	if v.ModelsCheck.Status != 200 {
		return ""
	}
	return judgeModels(v.Models, spec, "")
}

// serveCurrent reports whether a serve recorded with hash h runs spec (see
// ServeSpec.Current).
func serveCurrent(spec ServeSpec, h string) bool {
	current, _ := spec.Current(h)
	return current
}

// unknownOnly reports whether the serve recorded by rec differs from sv
// only in values this run was not given (hostplan.OnlyUnknown).
func unknownOnly(sv *VLLMServe, spec ServeSpec, rec observe.ProcessRecord) bool {
	if len(rec.Attrs) == 0 {
		return false
	}
	schema := serveSchema()
	after := attrs.Normalize(schema, serveRecordValues(sv, spec.SecretKey))
	return hostplan.OnlyUnknown(&sv.Decl, attrs.ChangedPaths(schema, attrs.Decode(schema, rec.Attrs, rec.Sensitive), after))
}

// serveAttrs are the serve's attributes; before values come from the record
// apply wrote beside the process.
func serveAttrs(sv *VLLMServe, spec ServeSpec, action plan.Action, rec observe.ProcessRecord) []plan.AttrChange {
	schema := serveSchema()
	after := attrs.Normalize(schema, serveRecordValues(sv, spec.SecretKey))
	before := attrs.Values{}
	if action != plan.Create {
		before = attrs.Decode(schema, rec.Attrs, rec.Sensitive)
		if spec.SecretKey != nil && before.UnkeyedDigests() {
			// Started by an earlier rayform, which digested secrets
			// without the key: compared in that form.
			after = attrs.Normalize(schema, serveRecordValues(sv, nil))
		}
		// What the record does not say is taken as unchanged.
		for k, v := range after {
			if _, ok := before[k]; !ok {
				before[k] = v
			}
		}
	}
	return attrs.Changes(schema, before, after)
}

// clusterGPUs is the GPUs Ray will see in a cluster: per node, the
// declared gpus, or fewer where nvidia-smi lists fewer; the total, and
// each node's count in words for messages.
func (p *planner) clusterGPUs(rc *cluster.RayCluster) (int, []string) {
	have := 0
	var parts []string
	for _, node := range rc.Nodes() {
		gpus := p.nodeGPUs(node)
		have += gpus
		parts = append(parts, fmt.Sprintf("%s: %d", node, gpus))
	}
	return have, parts
}

// nodeGPUs is the GPUs Ray will see on node (see clusterGPUs).
func (p *planner) nodeGPUs(node string) int {
	gpus := 0
	if n := p.cfg.Nodes[node]; n != nil {
		gpus = n.GPUs
	}
	if hf := p.Host(node); hf != nil && hf.GPUs.Err == "" {
		gpus = min(gpus, len(hf.GPUs.List))
	}
	return gpus
}

// serveGPUs is the GPUs a serve takes: tensor × pipeline parallelism.
func serveGPUs(sv *VLLMServe) int {
	return max(sv.TensorParallelSize, 1) * max(sv.PipelineParallelSize, 1)
}

// capacity checks that a serve alone fits its cluster's GPUs.
func (p *planner) capacity(sv *VLLMServe, rc *cluster.RayCluster) {
	need := serveGPUs(sv)
	have, parts := p.clusterGPUs(rc)
	if need > have {
		p.Find(plan.Error, sv.Addr, "", fmt.Sprintf("tensor_parallel_size × pipeline_parallel_size = %d, but Ray will see %d GPUs", need, have),
			"GPUs per node ("+strings.Join(parts, ", ")+"). vLLM would wait for a placement group that can never be created.",
			"lower the parallelism or add nodes to the cluster")
	}
}

// gpuBudget checks that the serves of a cluster, each of which fits
// alone (capacity), fit together.
//
// On a multi-node cluster (vLLM's Ray executor) each serve holds, for its
// whole life, a placement group of tensor × pipeline bundles of one GPU,
// whose first bundle vLLM pins to the node its engine runs on, the head
// (vLLM refuses to start, "Current node has no GPU available", when the
// head has no free GPU). So the serves must fit the cluster's GPUs
// together, and there can be no more serves than the head has GPUs; a
// serve beyond the budget never starts (Ray leaves its placement group
// pending until vLLM gives up).
//
// On a single node vLLM runs without Ray, on the node's first GPUs (or
// those its env's CUDA_VISIBLE_DEVICES names): serves share devices, and
// each takes gpu_memory_utilization of a device's memory, which vLLM
// requires free at its start. So on every device the serves using it must
// not ask more than the whole device.
func (p *planner) gpuBudget(rc *cluster.RayCluster) {
	var serves []*VLLMServe
	have, parts := p.clusterGPUs(rc)
	for _, sv := range sortedServes(p.cfg) {
		if sv.Cluster != rc.Name {
			continue
		}
		if serveGPUs(sv) > have {
			p.refuseBudget(rc)
			return // capacity reports it on its own
		}
		serves = append(serves, sv)
	}
	if len(serves) < 2 {
		return
	}
	if len(rc.Workers) == 0 {
		p.deviceBudget(rc, serves)
		return
	}
	need := 0
	var addrs, each []string
	for _, sv := range serves {
		n := serveGPUs(sv)
		need += n
		addrs = append(addrs, sv.Addr)
		each = append(each, fmt.Sprintf("%s needs %d (%d × %d)", sv.Addr, n, max(sv.TensorParallelSize, 1), max(sv.PipelineParallelSize, 1)))
	}
	detail := strings.Join(each, "; ") + ". GPUs per node (" + strings.Join(parts, ", ") + ")."
	if need > have {
		p.refuseBudget(rc)
		p.Find(plan.Error, rc.Addr, "", fmt.Sprintf("the serves of %s need %d GPUs together, but Ray will see %d", rc.Addr, need, have),
			detail+" Each serve holds its GPUs for its whole life, so the serves beyond the budget would wait for GPUs that never free up.",
			"lower the parallelism of "+strings.Join(addrs, ", ")+", remove a serve, or add nodes to "+rc.Addr)
		return
	}
	// Where vLLM's Ray executor places them, started smallest first on
	// the cluster with every GPU free (placeServes, the budget's one
	// judgment; clusterBudget judges the serves a plan starts against
	// what Ray reports free).
	version := ""
	if hf := p.Host(rc.Head); hf != nil {
		if _, known, ok := p.imageAnswer(rc, hf); ok {
			version = answerOf(known).VLLM
		}
	}
	var nodes []gpuNode
	for _, n := range rc.Nodes() {
		g := p.nodeGPUs(n)
		nodes = append(nodes, gpuNode{Name: n, Total: g, Free: g})
	}
	v := placeServes(nodes, serves, func(sv *VLLMServe) bool { return needsHeadGPU(sv, rc, version) })
	if v.Failed == nil {
		p.unifiedShare(rc, nodes, v.Order)
		return
	}
	p.refuseBudget(rc)
	summary, fix := budgetSummary(v, rc, "fresh"), fmt.Sprintf("lower the parallelism of %s or of a serve before it, remove a serve, or give the head %s more GPUs", v.Failed.Addr, rc.Head)
	if head := p.nodeGPUs(rc.Head); v.Head && len(serves) > head {
		summary, fix = fmt.Sprintf("%d serves on %s, but its head %s has %d GPUs", len(serves), rc.Addr, rc.Head, head), "remove a serve, or give the head more GPUs"
	}
	p.Find(plan.Error, rc.Addr, rc.Head, summary, detail+" "+budgetDetail(v, nil, "fresh", version), fix)
}

// refuseBudget records that gpuBudget (or capacity) refused rc's serves.
func (p *planner) refuseBudget(rc *cluster.RayCluster) {
	if p.overBudget == nil {
		p.overBudget = map[string]bool{}
	}
	p.overBudget[rc.Name] = true
}

// deviceBudget is gpuBudget on a single node: per device, the serves that
// use it must not ask more than its whole memory.
func (p *planner) deviceBudget(rc *cluster.RayCluster, serves []*VLLMServe) {
	users := map[int][]*VLLMServe{}
	for _, sv := range serves {
		for _, d := range serveDevices(sv) {
			users[d] = append(users[d], sv)
		}
	}
	// One finding per set of serves sharing devices, naming the devices.
	type group struct {
		serves  []*VLLMServe
		devices []string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, d := range slices.Sorted(maps.Keys(users)) {
		share := 0.0
		var addrs []string
		for _, sv := range users[d] {
			share += sv.GPUMemoryUtilization
			addrs = append(addrs, sv.Addr)
		}
		if len(users[d]) < 2 || share <= 1+1e-9 {
			continue
		}
		key := strings.Join(addrs, " ")
		g := byKey[key]
		if g == nil {
			g = &group{serves: users[d]}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.devices = append(g.devices, strconv.Itoa(d))
	}
	for _, g := range groups {
		share := 0.0
		var each, addrs []string
		for _, sv := range g.serves {
			share += sv.GPUMemoryUtilization
			addrs = append(addrs, sv.Addr)
			each = append(each, fmt.Sprintf("%s %g", sv.Addr, sv.GPUMemoryUtilization))
		}
		gpus := "GPU " + g.devices[0]
		if len(g.devices) > 1 {
			gpus = "GPUs " + strings.Join(g.devices, ", ")
		}
		p.Find(plan.Error, rc.Addr, rc.Head, fmt.Sprintf("%s share %s of %s and ask %.2f of each one's memory together", strings.Join(addrs, " and "), gpus, rc.Head, share),
			fmt.Sprintf("On a single node vLLM runs without Ray, on the node's first GPUs (cuda:0 up to its tensor × pipeline parallelism) unless the serve's env sets CUDA_VISIBLE_DEVICES; each serve requires gpu_memory_utilization of the device's memory free at its start (%s), so the later one fails with \"Free memory on device cuda:%s ... is less than desired GPU memory utilization\".", strings.Join(each, ", "), g.devices[0]),
			"lower gpu_memory_utilization so the serves on a GPU ask at most 1 together, or give each serve GPUs of its own with env = { CUDA_VISIBLE_DEVICES = \"...\" }")
	}
}

// serveDevices are the GPUs (by index on the node) a serve of a
// single-node cluster uses: the first tensor × pipeline of those its env's
// CUDA_VISIBLE_DEVICES lists, else 0 up to that count.
func serveDevices(sv *VLLMServe) []int {
	n := serveGPUs(sv)
	var out []int
	if v, ok := sv.Env["CUDA_VISIBLE_DEVICES"]; ok {
		for f := range strings.SplitSeq(v, ",") {
			d, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return nil // a UUID or MIG name: not something to count
			}
			out = append(out, d)
		}
		return out[:min(n, len(out))]
	}
	for d := range n {
		out = append(out, d)
	}
	return out
}

// memoryMonitor flags Ray's memory monitor on unified memory: vLLM takes
// gpu_memory_utilization of the machine's whole memory, and the monitor
// kills workers when usage crosses its threshold (0.95) during CUDA graph
// capture.
// exposure warns of a serve that answers beyond the fabric without a key
// (VLLMServe.Exposed): an explicit choice, shown on every plan.
func (p *planner) exposure(sv *VLLMServe, rc *cluster.RayCluster) {
	if !sv.Exposed() {
		return
	}
	r := sv.Decl.Range("listen")
	p.Finding(plan.Finding{Severity: plan.Warning, Address: sv.Addr, At: fmt.Sprintf("%s:%d", r.Filename, r.Start.Line),
		Summary: fmt.Sprintf("%s answers anyone who reaches %s on port %d, without a key", sv.Addr, rc.Head, sv.Port),
		Detail:  "listen = \"all\" makes vLLM listen on every address of the head (--host 0.0.0.0) and no api_key is set: anyone on the management network can run completions on your GPUs and read what the model serves.",
		Fix:     "Set api_key = var.vllm_api_key (a sensitive variable), or listen = \"fabric\" to answer the cluster's network only."})
}

func (p *planner) memoryMonitor(sv *VLLMServe, rc *cluster.RayCluster) {
	if !rc.MemoryMonitor {
		return
	}
	for _, node := range rc.Nodes() {
		hf := p.Host(node)
		if hf == nil || !hf.UnifiedMemory || hf.Memory.TotalBytes == 0 {
			continue
		}
		threshold := rayDefaultMemoryThreshold
		if v, err := strconv.ParseFloat(rc.Env["RAY_memory_usage_threshold"], 64); err == nil {
			threshold = v
		}
		total := float64(hf.Memory.TotalBytes) / (1 << 30)
		vllm := sv.GPUMemoryUtilization * total
		limit := threshold * total
		headroom := limit - vllm
		detail := fmt.Sprintf("%s has %.2f GiB of unified memory. vLLM will take %.2f × %.2f = %.2f GiB; Ray's memory monitor kills workers above %.2f × %.2f = %.2f GiB, which leaves %.2f GiB for the OS, Ray and CUDA graph capture.",
			node, total, sv.GPUMemoryUtilization, total, vllm, threshold, total, limit, headroom)
		fix := "set memory_monitor = false on " + rc.Addr + " (RAY_memory_monitor_refresh_ms=0)"
		sev := plan.Warning
		if headroom < memoryHeadroomLimit*total {
			sev = plan.Error
			fix += fmt.Sprintf(", or lower gpu_memory_utilization to at most %.2f", threshold-memoryHeadroomLimit)
		}
		p.Find(sev, sv.Addr, node, "Ray's memory monitor is on for unified memory", detail, fix)
		return
	}
}

// failedBefore warns that the serve apply would start now is the one
// whose start failed last time, with the cause, and says where the
// endpoint stands: back on the previous serve, or down.
func (p *planner) failedBefore(sv *VLLMServe, spec ServeSpec, rec observe.ProcessRecord, f FailedStart) {
	where, logs := fmt.Sprintf("%s is down: no serve runs on port %d.", sv.Addr, sv.Port), "logs"
	if f.Restored && rec.Found && rec.Alive && rec.SpecHash != spec.Hash() {
		where, logs = fmt.Sprintf("apply put the previous serve of %s back; it runs on port %d.", sv.Addr, sv.Port), "logs -previous"
	}
	r := sv.Range("model")
	p.Finding(plan.Finding{Severity: plan.Warning, Address: sv.Addr, At: fmt.Sprintf("%s:%d", r.Filename, r.Start.Line),
		Summary: "this configuration of the serve failed to start at " + f.At.Format(time.DateTime) + ": " + f.Cause,
		Detail:  "rayform started exactly this configuration before and it did not become healthy; " + where + " `rayform " + logs + " " + sv.Addr + "` shows that start's log, `rayform diagnose " + sv.Addr + "` its cause.",
		Fix:     "fix the cause before applying again, or go back to the configuration that served"})
}

// downtime says what replacing a running serve costs its clients, as one
// of the change's reasons: apply stops it, then starts the new one, so the
// endpoint does not answer for the new one's load time; the estimate is
// the serve's last measured start on the same head (recorded beside it
// when it answered).
func (p *planner) downtime(sv *VLLMServe, rc *cluster.RayCluster, head *observe.HostFacts, spec ServeSpec) string {
	if secs, at, ok := lastLoad(head, spec, p.Project()); ok {
		return fmt.Sprintf("stop-then-start: its endpoint is down while the new serve loads, about %.0f s (its last start on %s, at %s, took %.1f s); if the new one fails, apply puts this one back", secs, rc.Head, at.Format(time.DateTime), secs)
	}
	return fmt.Sprintf("stop-then-start: its endpoint is down while the new serve loads (no start of it measured on %s yet); if the new one fails, apply puts this one back", rc.Head)
}
