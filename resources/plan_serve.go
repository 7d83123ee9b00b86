package resources

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
)

// memoryHeadroomLimit is the share of memory below Ray's kill threshold
// that vLLM must leave on unified memory, for the OS, Ray itself and CUDA
// graph capture: less than this is an error, not a warning.
const memoryHeadroomLimit = 0.10

// rayDefaultMemoryThreshold is Ray's RAY_memory_usage_threshold default.
const rayDefaultMemoryThreshold = 0.95

func (p *planner) serve(sv *VLLMServe) {
	addr := sv.Addr
	rc := p.cfg.RayClusters[sv.Cluster]
	if rc == nil {
		return
	}
	spec, err := ServeSpecFor(p.cfg, sv)
	if err != nil {
		p.finding(plan.Error, addr, "", err.Error(), "", "")
		return
	}
	p.capacity(sv, rc)
	p.memoryMonitor(sv, rc)
	head := p.host(rc.Head)
	clusterAction := p.clusterAction[rc.Name]
	var rec observe.ServeRecord
	if head != nil {
		rec = head.Serves[sv.Name]
	}
	action := plan.NoOp
	var reasons, drift []string
	switch {
	case head == nil:
		// Unobservable head: a finding already says so.
	case clusterAction == plan.Create:
		action = plan.Create
	case clusterAction == plan.Replace:
		action = plan.Create
		if rec.Found {
			action = plan.Replace
			reasons = append(reasons, "its Ray cluster is replaced")
		}
	case p.in.Replace[addr] && rec.Found:
		action = plan.Replace
		reasons = append(reasons, "replacement requested with -replace")
	case !rec.Found:
		action = plan.Create
		if p.stateHas(addr) {
			drift = append(drift, "the serve process record is gone (container recreated outside rayform)")
		}
	case rec.SpecHash != spec.Hash():
		action = plan.Replace
		reasons = append(reasons, "the serve arguments changed")
	case clusterAction == plan.Update:
		// A container of a node it spans is restarted or removed: on
		// real vLLM the serve's workers die with it, so the serve is
		// replaced too (apply stops it before the cluster changes).
		action = plan.Replace
		reasons = append(reasons, "its Ray cluster restarts or removes a node it spans ("+strings.Join(p.changedNodes(rc), ", ")+")")
	case !rec.Alive:
		action = plan.Replace
		drift = append(drift, "the vllm serve process is not running")
	case head.VLLM.Health.TimedOut:
		// The port is open (weights are loaded: vLLM opens it last) but
		// nothing answers: hung, not starting.
		action = plan.Replace
		drift = append(drift, "vLLM /health did not answer within 2s: the vllm serve process runs but is hung")
	case head.VLLM.Health.Refused || head.VLLM.Health.Status == 0:
		p.finding(plan.Warning, addr, rc.Head, "vLLM is still starting (its port is closed)", "The serve process runs; weights may still be loading.", "wait, or follow the log: docker exec "+spec.Container+" tail -f "+spec.LogPath())
	case head.VLLM.Health.Status != 200:
		action = plan.Replace
		drift = append(drift, fmt.Sprintf("vLLM /health answers %d", head.VLLM.Health.Status))
	default:
		if d := modelsDrift(head.VLLM, spec); d != "" {
			action = plan.Replace
			drift = append(drift, d)
		}
	}
	if action != plan.NoOp && head != nil && !(rec.Found && rec.Alive) {
		p.portsFree(addr, rc.Head, "The vllm serve of "+addr, []portUse{{sv.Port, "port"}})
	}
	attrs := serveAttrs(sv, spec, action, rec)
	if len(drift) > 0 {
		p.res.Plan.Drift = append(p.res.Plan.Drift, plan.Drift{Address: addr, Host: rc.Head, Summary: strings.Join(drift, "; ")})
	}
	p.res.Plan.Changes = append(p.res.Plan.Changes, plan.ResourceChange{Address: addr, Type: "vllm_serve", Name: sv.Name, Action: action,
		Hosts: []string{rc.Head}, Reasons: append(drift, reasons...), Attrs: attrs})
	if action != plan.NoOp {
		p.res.Work[addr] = &Work{Address: addr, Type: "vllm_serve", Action: action, Hosts: []string{rc.Head},
			Serve: &ServeWork{Spec: spec, Stop: rec.Found || action == plan.Replace, Start: true, HeadIP: p.addrs[rc.Head], ReadyTimeout: sv.ReadyTimeout,
				Check: serveCheck(p.cfg, rc, p.addrs, p.ifaces)}}
	}
}

// modelsDrift judges the /v1/models list observe read (judgeModels); ""
// when it did not read one.
func modelsDrift(v observe.VLLM, spec ServeSpec) string {
	if v.ModelsCheck.Status != 200 {
		return ""
	}
	return judgeModels(v.Models, spec, "")
}

// serveAttrs are the serve's attributes; before values come from the record
// apply wrote beside the process.
func serveAttrs(sv *VLLMServe, spec ServeSpec, action plan.Action, rec observe.ServeRecord) []plan.AttrChange {
	schema := serveSchema()
	after := normalize(schema, serveRecordValues(sv))
	before := attrValues{}
	if action != plan.Create {
		before = decodeAttrs(schema, rec.Attrs, rec.Sensitive)
		// What the record does not say is taken as unchanged.
		for k, v := range after {
			if _, ok := before[k]; !ok {
				before[k] = v
			}
		}
	}
	return attrChanges(schema, before, after)
}

// capacity checks TP×PP against the GPUs Ray will see on the cluster.
func (p *planner) capacity(sv *VLLMServe, rc *RayCluster) {
	need := max(sv.TensorParallelSize, 1) * max(sv.PipelineParallelSize, 1)
	have := 0
	var parts []string
	for _, node := range rc.Nodes() {
		n := p.cfg.Nodes[node]
		gpus := 0
		if n != nil {
			gpus = n.GPUs
		}
		if hf := p.host(node); hf != nil && hf.GPUs.Err == "" {
			gpus = min(gpus, len(hf.GPUs.List))
		}
		have += gpus
		parts = append(parts, fmt.Sprintf("%s: %d", node, gpus))
	}
	if need > have {
		p.finding(plan.Error, sv.Addr, "", fmt.Sprintf("tensor_parallel_size × pipeline_parallel_size = %d, but Ray will see %d GPUs", need, have),
			"GPUs per node ("+strings.Join(parts, ", ")+"). vLLM would wait for a placement group that can never be created.",
			"lower the parallelism or add nodes to the cluster")
	}
}

// memoryMonitor flags Ray's memory monitor on unified memory: vLLM takes
// gpu_memory_utilization of the machine's whole memory, and the monitor
// kills workers when usage crosses its threshold (0.95) during CUDA graph
// capture.
func (p *planner) memoryMonitor(sv *VLLMServe, rc *RayCluster) {
	if !rc.MemoryMonitor {
		return
	}
	for _, node := range rc.Nodes() {
		hf := p.host(node)
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
		p.finding(sev, sv.Addr, node, "Ray's memory monitor is on for unified memory", detail, fix)
		return
	}
}
