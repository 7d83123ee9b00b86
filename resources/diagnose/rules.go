package diagnose

import (
	"fmt"
	"slices"
	"strings"
)

// rule recognises one cause: match selects the trigger lines (by their body,
// prefixes stripped); build turns them into a Diagnosis, or declines (false)
// when the lines turn out not to be a failure (e.g. a retry that succeeded).
type rule struct {
	cause Cause
	match func(body string) bool
	build func(s *scan, hits []int) (Diagnosis, bool)
}

// rules returns the causes in precedence order (see the package doc).
// Each rule lives in the file of its failure domain: rules_image.go (the
// container image and what it brings), rules_hub.go (the Hugging Face Hub),
// rules_ray.go (Ray's cluster, nodes and placement groups),
// rules_distributed.go (c10d, NCCL, Gloo), rules_memory.go (device and host
// memory), rules_serve.go (vLLM's command line, engine and process).
func rules() []rule {
	return []rule{
		{GPURuntime, matchGPURuntime, buildGPURuntime},
		{DriverTooOld, matchDriver, buildDriver},
		{CUDAArchUnsupported, matchArchKernel, buildArchKernel},
		{ImagePull, matchImagePull, buildImagePull},
		{RayMissing, matchRayMissing, buildRayMissing},
		{VLLMArgs, matchVLLMArgs, buildVLLMArgs},
		{AddrInUse, matchAddrInUse, buildAddrInUse},
		{HFAccess, matchHF, buildHF},
		{ModelTypeUnknown, matchModelType, buildModelType},
		{ArchUnsupported, matchArch, buildArch},
		{TPHeads, matchTPHeads, buildTPHeads},
		{RayLocal, matchRayLocal, buildRayLocal},
		{GCSUnreachable, matchGCS, buildGCS},
		{RayPortUnreachable, matchRayPort, buildRayPort},
		{RayNodeIPMismatch, matchNoRaylet, buildNoRaylet},
		{NCCLInterface, matchNCCL, buildNCCL},
		{GlooInterface, matchGloo, buildGloo},
		{GlooMesh, matchGlooMesh, buildGlooMesh},
		{C10dUnreachable, matchC10d, buildC10d},
		{NCCLPeer, matchNCCLPeer, buildNCCLPeer},
		{NCCLNet, matchNCCLNet, buildNCCLNet},
		{NCCLSystem, matchNCCLSystem, buildNCCLSystem},
		{DuplicateNodeIP, matchDuplicateIP, buildDuplicateIP},
		{RayDriverNoGPU, matchDriverNoGPU, buildDriverNoGPU},
		{PlacementGroup, matchPG, buildPG},
		{FreeMemory, matchFreeMemory, buildFreeMemory},
		{RayOOM, matchRayOOM, buildRayOOM},
		{CUDAOOM, matchCUDAOOM, buildCUDAOOM},
		{Signature, matchSignature, buildSignature},
		{ServeKilled, matchKilled, buildKilled},
		{FatalError, matchAny, buildFatalRule},
		{EngineCore, matchEngineCore, buildEngineCore},
		{ReadyTimeout, matchAny, buildReadyTimeout},
	}
}

// byContext reports whether the rule is decided by the context or by the
// whole log rather than by its lines: its match selects every line.
func (r rule) byContext() bool {
	return r.cause == ReadyTimeout || r.cause == ServeKilled || r.cause == FatalError
}

// salient reports whether a rule or the fatal-error finder could select a
// line (its text and body): the lines the bounded window keeps between a
// long log's head and tail.
func salient(text, b string) bool {
	if fatalShape(text, b) || isHealth(text) {
		return true
	}
	for _, r := range rules() {
		if r.byContext() {
			continue
		}
		if r.match(b) {
			return true
		}
	}
	return false
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// ---- unknown ----------------------------------------------------------------

// unknown shows the last meaningful lines of every log.
func (s *scan) unknown() Diagnosis {
	var hosts []string
	perLog := make([][]int, len(s.logs))
	for j := range s.lines {
		perLog[s.lines[j].log] = append(perLog[s.lines[j].log], j)
	}
	nonEmpty := 0
	for k, idx := range perLog {
		if len(idx) > 0 {
			nonEmpty++
			name := orDefault(s.logs[k].Host, s.logs[k].Source)
			if !slices.Contains(hosts, name) {
				hosts = append(hosts, name)
			}
		}
	}
	d := Diagnosis{Cause: Unknown}
	if nonEmpty == 0 {
		d.Title = "no log output to diagnose"
		d.Explanation = "The logs rayform read are empty: the process died before printing, or the wrong log was read."
		d.Fix = "Read the container's state on each host: docker inspect --format '{{.State.Status}} {{.State.ExitCode}} {{.State.Error}}' <container>"
		return d
	}
	// Share maxTail lines across the logs, newest kept: a ceiling share each,
	// then drop the oldest line of the longest share until it fits.
	per := (maxTail + nonEmpty - 1) / nonEmpty
	tails := make([][]int, len(perLog))
	total := 0
	for k, idx := range perLog {
		tails[k] = s.tail(idx, per)
		total += len(tails[k])
	}
	for ; total > maxTail; total-- {
		longest := 0
		for k := range tails {
			if len(tails[k]) > len(tails[longest]) {
				longest = k
			}
		}
		tails[longest] = tails[longest][1:]
	}
	for _, t := range tails {
		for _, j := range t {
			d.Evidence = append(d.Evidence, s.evidence(j))
		}
	}
	if len(d.Evidence) == 0 {
		d.Title = "the logs of " + strings.Join(hosts, ", ") + " hold only stack frames"
		d.Explanation = "Every line rayform read is a stack frame (Python \"File ...\", torch \"frame #13: ...\", C++ backtraces), which says where a process was, not why it failed; frames are never evidence. " +
			"The message that names the error was printed before these lines, or to another log."
		d.Fix = "Read more of the log on each host (docker logs <container> without a tail limit) for the first exception message above the frames."
		return d
	}
	d.Title = "no known failure pattern in the logs of " + strings.Join(hosts, ", ")
	d.Explanation = fmt.Sprintf("None of the %d failure patterns rayform knows matched. The last lines that say something are shown (traceback frames and progress bars left out); the root cause is often earlier in the log.", len(rules()))
	d.Fix = "Read the complete logs on each host (docker logs <container>); if the cause is a configuration rayform manages, fix it in the configuration and re-run rayform apply."
	return d
}
