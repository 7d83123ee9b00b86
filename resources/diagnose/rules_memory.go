package diagnose

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// This file holds the rules of the memory domain: vLLM's free-memory check,
// Ray's memory monitor, CUDA out of memory.

// ---- free memory below the requested utilization ----------------------------

var freeMemRE = regexp.MustCompile(`Free memory on device(?: (\S+))? \(([\d.]+)/([\d.]+) GiB\) on startup is less than desired GPU memory utilization \(([\d.]+), ([\d.]+) GiB\)`)

func matchFreeMemory(b string) bool {
	return strings.Contains(b, "Free memory on device")
}

func buildFreeMemory(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	host := s.nodeOf(i)
	c := s.ctx
	w := s.window(i, 2)
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}}
	m := freeMemRE.FindStringSubmatch(w)
	if m != nil && !freeMemRE.MatchString(s.lines[i].body) && i+1 < len(s.lines) && s.lines[i+1].log == s.lines[i].log {
		d.Evidence = append(d.Evidence, s.evidence(i+1)) // the message wraps
	}
	if m == nil {
		d.Title = "vLLM" + onHost(host) + " found less free GPU memory than gpu_memory_utilization requests"
		d.Explanation = "vLLM reserves gpu_memory_utilization × total memory at startup and requires it to be free."
		d.Fix = "Lower gpu_memory_utilization on " + c.serve() + ", or free the memory held by other processes."
		return d, true
	}
	dev := orDefault(m[1], "the GPU")
	free, _ := strconv.ParseFloat(m[2], 64)
	total, _ := strconv.ParseFloat(m[3], 64)
	util := m[4]
	want, _ := strconv.ParseFloat(m[5], 64)
	d.Title = fmt.Sprintf("vLLM%s wants %.2f GiB free on %s at startup (gpu_memory_utilization %s), only %.2f of %.2f GiB is", onHost(host), want, dev, util, free, total)
	d.Explanation = fmt.Sprintf("vLLM reserves %s × %.2f GiB = %.2f GiB and checks it is free before loading; %.2f GiB is held by something else.", util, total, want, total-free)
	if c.UnifiedMemory {
		d.Explanation += "\nOn unified memory the GPU's free memory is the node's available RAM: the OS, the page cache (e.g. from reading the weights), Ray and other containers count against it."
	}
	sugg := 0.0
	if total > 0 {
		sugg = floor2(free/total - 0.02)
	}
	who := "`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`" + onHost(host) + " shows who holds it (a previous vllm serve?)"
	if c.UnifiedMemory {
		who = "drop the page cache with `sync; echo 3 | sudo tee /proc/sys/vm/drop_caches` and stop other GPU containers" + onHost(host) + " (nvidia-smi shows no memory figures on GB10; read /proc/meminfo)"
	}
	if sugg >= 0.1 {
		d.Fix = fmt.Sprintf("Lower gpu_memory_utilization on %s from %s to at most %.2f, or free the memory: %s.", c.serve(), util, sugg, who)
	} else {
		d.Fix = "Free the memory first — " + who + "; lowering gpu_memory_utilization that far would leave no room for the model."
	}
	return d, true
}

// ---- Ray OOM kill -----------------------------------------------------------

var rayMemRE = regexp.MustCompile(`Memory on the node \(IP: ([0-9A-Fa-f.:]+)[^)]*\).*? was\s+([\d.]+)GB / ([\d.]+)GB \(([\d.]+)\)(?:, which exceeds the memory usage threshold of (\d+(?:\.\d+)?))?`)

// rayOOMSummaryRE is the raylet's periodic summary of its kills.
var rayOOMSummaryRE = regexp.MustCompile(`(\d+) Workers \(tasks / actors\) killed due to memory pressure \(OOM\).*?at node \(ID: [0-9a-fA-F]+, IP: ([0-9A-Fa-f.:]+)\)`)

func matchRayOOM(b string) bool {
	return containsAny(b, "killed due to the node running low on memory", "NODE_OUT_OF_MEMORY", "killed due to memory pressure (OOM)") ||
		(strings.Contains(b, "Memory on the node (IP:") && strings.Contains(b, "exceeds the memory usage threshold"))
}

func buildRayOOM(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	var m []string
	for _, j := range hits {
		if m = rayMemRE.FindStringSubmatch(s.window(j, 3)); m != nil {
			i = j
			break
		}
	}
	ev := []Evidence{s.evidence(i)}
	c := s.ctx
	d := Diagnosis{Evidence: ev}
	if m == nil {
		node := s.nodeOf(i)
		for _, j := range hits {
			if sm := rayOOMSummaryRE.FindStringSubmatch(s.lines[j].body); sm != nil {
				i = j
				d.Evidence = []Evidence{s.evidence(j)}
				where := sm[2]
				if n := c.ownerOf(sm[2]).node; n != "" {
					where = n + " (" + sm[2] + ")"
				}
				node = where
				break
			}
		}
		d.Title = "Ray's memory monitor killed a worker" + onHost(node)
		d.Explanation = "Ray kills the most recently scheduled worker when node memory crosses RAY_memory_usage_threshold (default 0.95)."
		d.Fix = oomFix(c, 0, 0, 0.95)
		return d, true
	}
	// The numbers may sit on a continuation line: show it too.
	for j := i; j < len(s.lines) && j <= i+3 && s.lines[j].log == s.lines[i].log; j++ {
		if j != i && strings.Contains(s.lines[j].body, "GB / ") {
			d.Evidence = append(d.Evidence, s.evidence(j))
			break
		}
	}
	ip := m[1]
	used, _ := strconv.ParseFloat(m[2], 64)
	total, _ := strconv.ParseFloat(m[3], 64)
	frac, _ := strconv.ParseFloat(m[4], 64)
	thr := 0.95
	if m[5] != "" {
		thr, _ = strconv.ParseFloat(m[5], 64)
	}
	node := c.ownerOf(ip).node
	where := ip
	if node != "" {
		where = node + " (" + ip + ")"
	}
	d.Title = fmt.Sprintf("Ray's memory monitor killed a vLLM worker on %s at %.2f GB / %.2f GB (%s, threshold %s)", where, used, total, pct(frac), pct(thr))
	var why []string
	why = append(why, fmt.Sprintf("Ray kills a worker when the node's memory use crosses RAY_memory_usage_threshold (%s × %.2f GB = %.2f GB).", strconv.FormatFloat(thr, 'f', -1, 64), total, thr*total))
	util := c.GPUMemoryUtilization
	if c.UnifiedMemory {
		w := "On unified memory the GPU's memory is the node's RAM, so vLLM's reservation counts against the monitor"
		if util > 0 {
			w += fmt.Sprintf(": gpu_memory_utilization %s reserves %.2f GB", strconv.FormatFloat(util, 'f', -1, 64), util*total)
			if frac > util {
				w += fmt.Sprintf(" and the rest of the node (OS, Ray, page cache) took %.2f GB more", used-util*total)
			}
		}
		why = append(why, w+".")
	}
	if c.onRay() && !c.MemoryMonitorOn {
		why = append(why, "The configuration turns the monitor off, yet it ran: RAY_memory_monitor_refresh_ms=0 did not reach the raylet"+onHost(node)+" — it must be in the environment of `ray start` (the Ray container), not of vllm serve.")
	}
	d.Explanation = strings.Join(why, "\n")
	d.Fix = oomFix(c, frac, util, thr)
	return d, true
}

// oomFix is the fix for a Ray OOM kill; frac is the used fraction at the kill
// (0 if unknown), util the configured gpu_memory_utilization, thr the
// monitor threshold.
func oomFix(c Context, frac, util, thr float64) string {
	if !c.onRay() {
		// No configuration: say what holds for any Ray deployment.
		return "Host RAM ran out on that node. Reduce what uses it beside the killed worker (other processes and containers, CPU offload, Ray's object store: ray start --object-store-memory), " +
			"or raise RAY_memory_usage_threshold, or turn the monitor off with RAY_memory_monitor_refresh_ms=0 — both in the environment of `ray start` on every node, not of vllm serve; the kernel's OOM killer still guards the node. " +
			"On unified-memory GPUs (GB10, GH200) vLLM's --gpu-memory-utilization is host RAM too: lower it."
	}
	if !c.MemoryMonitorOn {
		return "Recreate the Ray containers of " + c.cluster() + " so every raylet starts with RAY_memory_monitor_refresh_ms=0 (rayform apply replaces them when memory_monitor = false); check with `docker inspect` that the variable is in .Config.Env on every node."
	}
	if !c.UnifiedMemory {
		return "Host RAM ran out; on a discrete GPU vLLM's gpu_memory_utilization is not host memory. Reduce what uses host RAM beside vLLM (other processes, CPU offload, or --swap-space on vLLM before 0.18, in extra_args on " + c.serve() +
			", Ray's object store via --object-store-memory), or raise RAY_memory_usage_threshold. memory_monitor = false on " + c.cluster() + " trades Ray's kill for the kernel's OOM killer."
	}
	f := "Set memory_monitor = false on " + c.cluster() + " (rayform starts every raylet with RAY_memory_monitor_refresh_ms=0)"
	if util > 0 {
		sugg := floor2(util - 0.05)
		if frac > util {
			sugg = min(sugg, floor2(thr-(frac-util)-0.05))
		}
		sugg = max(sugg, 0.1)
		f += fmt.Sprintf(", and/or lower gpu_memory_utilization on %s from %s to %.2f", c.serve(), strconv.FormatFloat(util, 'f', -1, 64), sugg)
		if frac > util {
			f += fmt.Sprintf(" (keeps vLLM plus the %.0f%% the rest of the node used at least 5%% below the %s threshold)", (frac-util)*100, strconv.FormatFloat(thr, 'f', -1, 64))
		}
	}
	return f + "; the kernel's OOM killer still guards the node."
}

// ---- CUDA OOM ---------------------------------------------------------------

var (
	cudaAllocRE = regexp.MustCompile(`Tried to allocate ([\d.]+ [KMGT]?i?B)`)
	cudaCapRE   = regexp.MustCompile(`GPU (\d+) has a total capacity of ([\d.]+ [KMGT]?i?B) of which ([\d.]+ [KMGT]?i?B) is free`)
	cudaOldRE   = regexp.MustCompile(`\(GPU (\d+); ([\d.]+ [KMGT]?i?B) total capacity; ([\d.]+ [KMGT]?i?B) already allocated; ([\d.]+ [KMGT]?i?B) free`)
	cudaProcRE  = regexp.MustCompile(`Process (\d+) has ([\d.]+ [KMGT]?i?B) memory in use`)
	cudaSelfRE  = regexp.MustCompile(`this process has ([\d.]+ [KMGT]?i?B) memory in use`)
	cudaOwnRE   = regexp.MustCompile(`Of the allocated memory ([\d.]+ [KMGT]?i?B) is allocated by PyTorch,.*?and ([\d.]+ [KMGT]?i?B) is reserved by PyTorch but unallocated`)
)

// cudaProcesses reads the processes torch lists in its OOM message and
// says which are other processes; other is true when one certainly is.
//
// torch prints "Process N has X memory in use" for every process NVML
// reports on the GPU, and "Including non-PyTorch memory, this process has
// X" for the one whose pid equals its own. Inside a container NVML reports
// host pids, so the process that ran out of memory is listed as "Process N"
// itself. Without the "this process" form, a listed process holding at
// least what this process's PyTorch holds (allocated + reserved) is taken
// to be this process; one holding less cannot be it.
func cudaProcesses(b string) (facts []string, other bool) {
	procs := cudaProcRE.FindAllStringSubmatch(b, -1)
	if len(procs) == 0 {
		return nil, false
	}
	if self := cudaSelfRE.FindStringSubmatch(b); self != nil {
		for _, p := range procs {
			facts = append(facts, "Another process (pid "+p[1]+") held "+p[2]+" on the GPU; this process held "+self[1]+".")
		}
		return facts, true
	}
	own := -1.0
	if m := cudaOwnRE.FindStringSubmatch(b); m != nil {
		a, okA := parseBytes(m[1])
		r, okR := parseBytes(m[2])
		if okA && okR {
			own = a + r
		}
	}
	for _, p := range procs {
		held, ok := parseBytes(p[2])
		switch {
		case !ok || own < 0:
			facts = append(facts, "pid "+p[1]+" held "+p[2]+" on the GPU; the message does not say whether that is this process (inside a container torch sees host pids).")
		case held+0.01*gib >= own:
			facts = append(facts, fmt.Sprintf("pid %s held %s on the GPU: at least the %.2f GiB this process's PyTorch holds, so it is this process itself (inside a container torch lists its host pid), not another one.", p[1], p[2], own/gib))
		default:
			facts = append(facts, "Another process (pid "+p[1]+") held "+p[2]+" on the GPU.")
			other = true
		}
	}
	return facts, other
}

// gib is one GiB in bytes.
const gib = 1 << 30

// parseBytes reads torch's sizes: "14.51 GiB", "738.96 MiB", "512 B".
func parseBytes(s string) (float64, bool) {
	num, unit, ok := strings.Cut(s, " ")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false
	}
	mult := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
	if mult == 0 {
		return 0, false
	}
	return v * mult, true
}

func matchCUDAOOM(b string) bool {
	return containsAny(b, "CUDA out of memory", "CUDA error: out of memory")
}

func buildCUDAOOM(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	for _, j := range hits {
		if cudaAllocRE.MatchString(s.lines[j].body) {
			i = j
			break
		}
	}
	b := s.lines[i].body
	host := s.nodeOf(i)
	c := s.ctx
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}}
	title := "CUDA out of memory" + onHost(host)
	var facts []string
	if m := cudaAllocRE.FindStringSubmatch(b); m != nil {
		title += " allocating " + m[1]
	}
	tooBig := false
	if m := cudaCapRE.FindStringSubmatch(b); m != nil {
		facts = append(facts, "GPU "+m[1]+" has "+m[2]+", of which "+m[3]+" was free.")
		if a := cudaAllocRE.FindStringSubmatch(b); a != nil {
			want, okW := parseBytes(a[1])
			total, okT := parseBytes(m[2])
			if okW && okT && want > total {
				tooBig = true
				facts = append(facts, "The single allocation ("+a[1]+") is larger than the whole GPU ("+m[2]+"): no memory setting makes it fit.")
			}
		}
	} else if m := cudaOldRE.FindStringSubmatch(b); m != nil {
		facts = append(facts, "GPU "+m[1]+" has "+m[2]+"; "+m[3]+" was allocated by PyTorch and "+m[4]+" free.")
	}
	procFacts, other := cudaProcesses(b)
	facts = append(facts, procFacts...)
	phase := ""
	lo, _ := s.logSpan(i)
	for j := lo; j < i; j++ {
		lb := s.lines[j].body
		switch {
		case containsAny(lb, "Capturing CUDA graph", "Graph capturing", "capturing CUDA graphs"):
			phase = "graphs"
		case containsAny(lb, "Loading safetensors checkpoint shards", "Loading weights", "Starting to load model"):
			phase = "weights"
		case containsAny(lb, "Memory profiling", "profile_run", "determine_available_memory", "Available KV cache memory"):
			phase = "profile"
		}
	}
	d.Title = title
	switch phase {
	case "graphs":
		facts = append(facts, "It happened during CUDA graph capture, which allocates outside the gpu_memory_utilization budget.")
	case "weights":
		facts = append(facts, "It happened while loading weights: this rank's share of the model does not fit.")
	}
	if len(facts) == 0 {
		facts = append(facts, "torch could not allocate device memory inside vLLM.")
	}
	d.Explanation = strings.Join(facts, "\n")
	util := "gpu_memory_utilization"
	if c.GPUMemoryUtilization > 0 {
		util = fmt.Sprintf("gpu_memory_utilization (now %s, try %.2f)", strconv.FormatFloat(c.GPUMemoryUtilization, 'f', -1, 64), floor2(c.GPUMemoryUtilization-0.05))
	}
	switch {
	case tooBig:
		d.Fix = "Make the request smaller — a shorter max_model_len or fewer max-num-batched-tokens on " + c.serve() + " (for vision models, smaller images or fewer per prompt) — or spread the model over more GPUs (tensor_parallel_size)."
	case other:
		d.Fix = "Stop the other process on that GPU (nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv" + onHost(host) + "), or lower " + util + " on " + c.serve() + "."
	case phase == "graphs":
		d.Fix = "Lower " + util + " on " + c.serve() + " to leave room for CUDA graphs, or add \"--enforce-eager\" to its extra_args (slower decode), or lower --max-num-seqs."
	case phase == "weights":
		d.Fix = "Spread the model over more GPUs (tensor_parallel_size / pipeline_parallel_size on " + c.serve() + "), or use a smaller or quantized model."
	default:
		d.Fix = "Lower " + util + " or max_model_len on " + c.serve() + ", or add \"--enforce-eager\" to extra_args."
	}
	return d, true
}
