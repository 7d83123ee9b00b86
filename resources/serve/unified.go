package serve

import (
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
)

// unifiedShare is the budget's memory half on unified-memory nodes (issue
// 39 item 7): the GPUs of such a node (GB10) have no memory of their own;
// torch reports the node's system memory as each one's total and free.
// Ray gives two serves placed on one node GPUs of their own (its
// CUDA_VISIBLE_DEVICES: the "cuda:0" of vLLM's message is the worker's
// first visible GPU, not the node's), but they take their
// gpu_memory_utilization of the same memory, and vLLM requires that much
// free at each start. Serves started one after another (apply orders the
// starts, Work.After) therefore cannot ask more than the whole memory
// together: the later one fails with "Free memory on device cuda:0 (…) on
// startup is less than desired GPU memory utilization". (Started at the
// same moment, as before apply ordered them, both passed that check and
// then shared memory neither could have alone.) On discrete GPUs each
// GPU's memory is its own and nothing is shared. vLLM's CPU build (the
// image's platform "cpu") takes no GPU memory: not judged.
//
// placements are the serves as placeServes placed them on nodes (rc's
// nodes, head first).
func (p *planner) unifiedShare(rc *cluster.RayCluster, nodes []gpuNode, placements []placed) {
	if p.cpuImage(rc) {
		return
	}
	for i, n := range nodes {
		hf := p.Host(n.Name)
		if hf == nil || !hf.UnifiedMemory {
			continue
		}
		var on []*VLLMServe
		share := 0.0
		for _, pl := range placements {
			if i < len(pl.GPUs) && pl.GPUs[i] > 0 {
				on = append(on, pl.Serve)
				share += pl.Serve.GPUMemoryUtilization
			}
		}
		if len(on) < 2 || share <= 1+1e-9 {
			continue
		}
		var addrs, each []string
		for _, sv := range on {
			addrs = append(addrs, sv.Addr)
			each = append(each, fmt.Sprintf("%s %g", sv.Addr, sv.GPUMemoryUtilization))
		}
		p.refuseBudget(rc)
		p.Find(plan.Error, rc.Addr, n.Name,
			fmt.Sprintf("%s run on GPUs of %s, whose memory is unified, and ask %.2f of it together", strings.Join(addrs, " and "), n.Name, share),
			fmt.Sprintf("Ray places them on %s (vLLM's Ray executor, as the GPU budget judges it) and gives each GPUs of its own, but %s's GPUs share its system memory: each serve takes gpu_memory_utilization of all of it (%s) and vLLM requires that much free when it starts, so the one started later fails with \"Free memory on device cuda:0 (…) is less than desired GPU memory utilization\".", n.Name, n.Name, strings.Join(each, ", ")),
			fmt.Sprintf("lower gpu_memory_utilization so the serves on %s ask at most 1 together (less what the system itself uses), or keep one serve per unified-memory node", n.Name))
	}
}

// cpuImage reports whether rc's image holds vLLM's CPU build (its answer's
// platform "cpu"): its serves take no GPU memory.
func (p *planner) cpuImage(rc *cluster.RayCluster) bool {
	hf := p.Host(rc.Head)
	if hf == nil {
		return false
	}
	_, known, ok := p.imageAnswer(rc, hf)
	return ok && answerOf(known).Platform == "cpu"
}

// unifiedRoom reports whether sv's new generation, placed as pl beside
// the running serves kept, leaves every unified-memory node it lands on
// asked at most its whole memory: the serves of the cluster are counted
// on it (Ray's report does not say where each runs), sv twice.
func (p *planner) unifiedRoom(rc *cluster.RayCluster, nodes []gpuNode, pl placed, kept []*VLLMServe) bool {
	if p.cpuImage(rc) {
		return true
	}
	share := pl.Serve.GPUMemoryUtilization
	for _, sv := range kept {
		share += sv.GPUMemoryUtilization
	}
	for i, n := range nodes {
		if hf := p.Host(n.Name); i < len(pl.GPUs) && pl.GPUs[i] > 0 && hf != nil && hf.UnifiedMemory && share > 1+1e-9 {
			return false
		}
	}
	return true
}
