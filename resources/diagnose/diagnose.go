// Package diagnose classifies the root cause of a failed apply step (Ray
// head or worker start, cluster verification, vLLM serve startup) from the
// logs of every host involved, and says what to change.
//
// It is pure: the caller reads the logs (more than the tail — the root cause
// of a vLLM failure is printed before a long wrapper traceback) and passes
// them with what rayform knows about the topology. Classify returns one
// Diagnosis: the cause, the verbatim evidence lines with the host and log
// they came from, an explanation built from the parsed values (addresses,
// ports, memory figures) compared with the declared configuration, and a
// precise fix.
//
// # Precedence
//
// A failure leaves lines from several layers: a worker that cannot reach the
// c10d master also makes the engine wrapper report "Engine core
// initialization failed", and a Ray OOM kill ends the same way. Classify
// tries the causes in a fixed order and reports the first that matches; the
// others are listed in Diagnosis.Also as consequences. The order puts a
// layer before the layers that depend on it:
//
//  1. GPURuntime      docker cannot give the container a GPU: nothing ran
//  2. DriverTooOld    the host's driver is older than the image's CUDA
//     (the container runtime's requirement, CUDA errors 804/803/35,
//     torch's driver check): nothing ran on the GPU
//  3. CUDAArchUnsupported the image's kernels were not built for the GPU's
//     architecture (GB10 is sm_121): "no kernel image", a kernel's device
//     assert, torch's capability check, a JIT's missing arch-named source
//  4. ImagePull       the image never arrived: nothing ran
//  5. RayMissing      the container ran but has no ray: no cluster
//  6. VLLMArgs        vLLM's argument parser refused the command line
//     (naming options later vLLM releases removed)
//  7. AddrInUse       a port rayform starts something on is taken
//  8. HFAccess        the Hub refused the model repository: nothing loads
//  9. ModelTypeUnknown the image's transformers does not know model_type
//  10. ArchUnsupported the image's vLLM does not know the model's architecture
//  11. TPHeads         tensor_parallel_size does not divide the heads
//  12. RayLocal       vLLM started its own Ray, which lacks the GPUs
//  13. GCSUnreachable a worker never joined: placement groups cannot fill
//  14. RayPortUnreachable a Ray process cannot reach one of Ray's ports
//     other than the GCS port (a raylet, an object manager, a worker, a
//     Redis shard; the GCS marking a node dead for missed health checks
//     with no memory kill in the logs): the node joined, a firewall drops
//     the rest
//  15. RayNodeIPMismatch a Ray process found no raylet under its node's IP
//     (Ray started under another address, or the process runs off the
//     cluster), and a process failed after it
//  16. NCCLInterface  a named interface does not exist: a certain config error
//  17. GlooInterface  (same, for Gloo)
//  18. GlooMesh       Gloo ranks cannot reach each other (loopback address)
//  19. C10dUnreachable workers cannot reach the TCPStore master (retries
//     exhausted, or no route: one refused try=0 is routine, the master is
//     not listening yet)
//  20. NCCLPeer       a rank lost rank 0's store while NCCL was set up: rank
//     0 died (a consequence: a cause that kills a process wins over it)
//  21. NCCLNet        NCCL's own WARN or "Last error:" line of a transport
//     (shared memory, InfiniBand/RoCE, sockets), of any NCCL release: the
//     rule names the class (nccl-shm, nccl-ib, nccl-socket) with the host,
//     the peer, the interface or GID it used
//  22. NCCLSystem     NCCL's "unhandled system error" with no line of its own
//  23. DuplicateNodeIP vLLM saw mixed addresses for its nodes
//  24. RayDriverNoGPU no free GPU in Ray on the node vllm serve runs on
//  25. PlacementGroup the placement group never filled
//  26. FreeMemory     vLLM's startup check: less free than requested
//  27. RayOOM         Ray's memory monitor killed a worker
//  28. CUDAOOM        torch ran out of device memory
//  29. Signature      a message of the signature catalogue generated from
//     the real sources (catalogue.json): its class names the cause
//     29b. ServeKilled    the serve process was stopped from outside
//  30. FatalError     no rule knows it: the error that ended the process
//     (an exception, a FATAL line, the container runtime's refusal, an
//     NCCL WARN), quoted with its host, component and the fix it gives;
//     wrapper errors (vLLM's engine core failure, a dead actor, a broken
//     pipe) rank under it (fatal.go)
//  31. EngineCore     vLLM's wrapper error with nothing found above it
//  32. ReadyTimeout   rayform's ready_timeout ran out while vLLM still worked
//  33. Healthy        nothing failed: a process reached ready (vLLM's
//     "Application startup complete", Ray's node started) and no error
//     ended a process after it
//  34. Unknown        nothing recognised: the last meaningful lines
//
// Silence on health: a rule's lines that all come before their log shows a
// process reaching ready were passed over (no failure), and so is an error
// line of a logger followed by normal progress.
//
// A rule declines when its lines do not support the cause (a retry that
// succeeded, a warning that is harmless outside a Ray deployment, a local
// Ray that had the GPUs it needed): precision over recall, and Unknown
// shows the lines rather than guess.
//
// Stack frames of every format (Python "File ...", torch "frame #13:",
// c10's "# 0  c10::...", glog "@ 0x...", "Exception raised from ...
// (most recent call first):") are never evidence.
//
// Within one cause the earliest matching line (in input order of the logs)
// is the primary evidence.
package diagnose

import (
	"net/netip"
	"slices"
	"time"
)

// Cause is the classified root cause of a failure. Its value is a stable,
// short identifier (also the fixture name under testdata/diagnose).
type Cause string

// The causes Classify can report, in no particular order; see the package
// documentation for the precedence.
const (
	// Unknown: no known failure pattern matched.
	Unknown Cause = "unknown"
	// GPURuntime: docker run --gpus failed because Docker has no NVIDIA runtime
	// (or the driver is not loaded).
	GPURuntime Cause = "gpu-runtime"
	// ImagePull: docker could not pull the image (denied, missing tag or
	// platform, registry unreachable).
	ImagePull Cause = "image-pull"
	// RayMissing: the image has no ray executable or Python module.
	RayMissing Cause = "ray-missing"
	// GCSUnreachable: a Ray worker could not reach the head's GCS.
	GCSUnreachable Cause = "gcs-unreachable"
	// NCCLInterface: NCCL_SOCKET_IFNAME names no interface on the host.
	NCCLInterface Cause = "nccl-interface"
	// GlooInterface: GLOO_SOCKET_IFNAME names no interface on the host.
	GlooInterface Cause = "gloo-interface"
	// C10dUnreachable: a torch.distributed client could not connect to the
	// c10d TCPStore master address.
	C10dUnreachable Cause = "c10d-unreachable"
	// DuplicateNodeIP: vLLM's Ray executor found fewer unique IPs than nodes
	// (or more), i.e. mixed address families across layers.
	DuplicateNodeIP Cause = "duplicate-node-ip"
	// PlacementGroup: vLLM's placement group could not be created.
	PlacementGroup Cause = "placement-group"
	// FreeMemory: vLLM's startup check found less free device memory than
	// gpu_memory_utilization requests.
	FreeMemory Cause = "free-memory"
	// RayOOM: Ray's memory monitor killed a worker.
	RayOOM Cause = "ray-oom"
	// CUDAOOM: torch raised CUDA out of memory.
	CUDAOOM Cause = "cuda-oom"
	// EngineCore: vLLM's engine core failed to start and nothing more
	// specific was recognised.
	EngineCore Cause = "engine-core-failed"
	// VLLMArgs: vLLM's argument parser refused the command line
	// ("unrecognized arguments", "ambiguous option", an invalid value).
	VLLMArgs Cause = "unrecognized-arguments"
	// AddrInUse: a port the process binds is already taken.
	AddrInUse Cause = "address-in-use"
	// ArchUnsupported: the image's vLLM cannot load the model's
	// architecture (vLLM older than the model).
	ArchUnsupported Cause = "model-arch-unsupported"
	// NCCLPeer: a rank lost the c10d store of rank 0 while setting up NCCL:
	// rank 0 exited.
	NCCLPeer Cause = "nccl-peer-lost"
	// ServeKilled: the serve process was stopped from outside (a signal).
	ServeKilled Cause = "serve-killed"
	// ReadyTimeout: rayform's ready_timeout ran out while vLLM was still
	// starting.
	ReadyTimeout Cause = "ready-timeout"
	// HFAccess: the Hugging Face Hub refused the model repository (gated,
	// private, or no such name) with 401/403/404.
	HFAccess Cause = "hf-access"
	// ModelTypeUnknown: the image's transformers does not know the
	// model_type of the model's config.json.
	ModelTypeUnknown Cause = "model-type-unknown"
	// TPHeads: tensor_parallel_size does not divide the attention heads.
	TPHeads Cause = "tp-heads-indivisible"
	// RayLocal: vLLM started a Ray of its own instead of joining the
	// cluster, and lacked GPUs there.
	RayLocal Cause = "ray-local-instance"
	// GlooMesh: Gloo could not connect its ranks (a rank advertised a
	// loopback or otherwise unreachable address).
	GlooMesh Cause = "gloo-mesh"
	// NCCLSystem: NCCL's "unhandled system error" (a failed socket,
	// memory or device call).
	NCCLSystem Cause = "nccl-system-error"
	// Signature: the rule of the signature catalogue (catalogue.go); the
	// cause it reports is the matching entry's class (e.g.
	// "kv-cache-too-small", "nccl-shm", "driver-too-old").
	Signature Cause = "signature"
	// FatalError: no rule knows the failure; the error that ended the
	// process is the cause, quoted in its own words with its fix.
	FatalError Cause = "fatal-error"
	// Healthy: the processes reached ready (vLLM's "Application startup
	// complete", Ray's node started) and no error after it: no failure.
	Healthy Cause = "healthy"
	// RayDriverNoGPU: vLLM found no GPU for itself in Ray on the node it
	// runs on (address mismatch, no GPUs, or GPUs held by a placement group).
	RayDriverNoGPU Cause = "ray-driver-no-gpu"
)

// Log is one log read from one host.
type Log struct {
	// Host is the node name the log was read on (e.g. "spark1").
	Host string
	// Source names the log (e.g. "vllm serve log", "ray head container").
	Source string
	// Text is the raw log content; it may contain ANSI colour codes, \r
	// progress updates and invalid UTF-8. Classify keeps a bounded window
	// of it (see ReadLog).
	Text []byte
	// kept is the window ReadLog kept of a streamed log (windowed set);
	// Text is then empty.
	kept     []rawLine
	windowed bool
}

// Context is what rayform knows about the deployment; every field is
// optional and makes the explanation and fix more precise.
type Context struct {
	// FabricCIDR is the data-plane network all layers should use.
	FabricCIDR netip.Prefix
	// FabricInterface is the netdev on the fabric (e.g. "enp1s0f1np1").
	FabricInterface string
	// NodeAddrs maps node name to its fabric IP.
	NodeAddrs map[string]string
	// MgmtAddrs maps node name to its management (SSH, default route) IP.
	MgmtAddrs map[string]string
	// HeadNode is the node running the Ray head.
	HeadNode string
	// RayPort is the head's GCS port (default 6379).
	RayPort int
	// MemoryMonitorOn is whether Ray's memory monitor is configured on.
	MemoryMonitorOn bool
	// UnifiedMemory is whether the GPUs share host memory (GB10, GH200).
	UnifiedMemory bool
	// GPUMemoryUtilization is the configured vllm_serve value (0 if unknown).
	GPUMemoryUtilization float64
	// Image is the container image of the cluster.
	Image string
	// Cluster, Network and Serve are the resource addresses to name in fixes
	// (e.g. "ray_cluster.main", "network.fabric", "vllm_serve.qwen").
	Cluster, Network, Serve string
	// VLLMVersion is the vLLM version in the image, when known.
	VLLMVersion string
	// ServePort is the vllm_serve's port (0 if unknown).
	ServePort int
	// PortHolders names, per port, the process a probe found listening on
	// it (e.g. "pid 4121 python3 (an earlier vllm serve)").
	PortHolders map[int]string
	// ReadyTimeout is set when rayform stopped waiting for vllm serve
	// after this long (its ready_timeout); the process was still running.
	ReadyTimeout time.Duration
	// ProcessExited is set when rayform found the serve process gone
	// before it was ready.
	ProcessExited bool
}

// Input is what Classify reads.
type Input struct {
	// Logs are the logs of every host involved, head first by convention.
	Logs []Log
	// Context is the declared topology and settings.
	Context Context
}

// Evidence is one verbatim log line (ANSI codes removed, secrets redacted).
type Evidence struct {
	// Host and Source identify the log the line came from.
	Host, Source string
	// Line is the log line.
	Line string
	// LineNo is the 1-based line number in the log.
	LineNo int
}

// Diagnosis is the classified root cause of a failure.
type Diagnosis struct {
	// Cause is the root cause.
	Cause Cause
	// Title is a one-line statement of the cause with its parsed values.
	Title string
	// Evidence are the lines that show the cause, most telling first.
	Evidence []Evidence
	// Explanation says why, comparing parsed values with the Context.
	Explanation string
	// Fix says what to change.
	Fix string
	// Also lists the other causes whose lines were present; they are
	// consequences of Cause by the precedence.
	Also []Cause
	// Known is true when the root cause is named; false for Unknown and for
	// a failure whose cause the logs do not show (vLLM's wrapper error
	// alone). Every rendering reads it (Text, Report).
	Known bool
	// Failure is true when the logs show a failure (known or not): what
	// `rayform diagnose` exits 2 on.
	Failure bool
	// consequence marks a diagnosis that is itself likely the effect of
	// another failure (a c10d connection refused by a master that had
	// already exited): a later rule for a process-killing cause wins.
	consequence bool
}

// Generic reports whether no rule named a specific cause: nothing found,
// no failure, the fatal error quoted in its own words, or vLLM's wrapper
// error alone. A caller that knows more (the data-plane check's own
// report) may then say more.
func (d Diagnosis) Generic() bool {
	switch d.Cause {
	case Unknown, Healthy, FatalError, EngineCore:
		return true
	}
	return false
}

// killsProcess lists the causes that end the process a c10d client
// connects to, so that its "Connection refused" follows from them.
func killsProcess(c Cause) bool {
	switch c {
	case RayOOM, CUDAOOM, FreeMemory, ServeKilled:
		return true
	}
	return false
}

// Classify returns the root cause of the failure shown by in.Logs.
func Classify(in Input) Diagnosis {
	s := newScan(in)
	var (
		best  Diagnosis
		found bool
		also  []Cause
	)
	for _, r := range rules() {
		hits := s.find(r.match)
		if len(hits) == 0 {
			continue
		}
		if !r.byContext() && s.reachedReady(hits[len(hits)-1]) {
			// Every line of the cause came before its processes reached
			// ready: an error they went past is no failure.
			continue
		}
		d, ok := r.build(s, hits)
		if !ok {
			continue
		}
		if found && best.consequence && killsProcess(r.cause) {
			// The earlier match was an effect of this one.
			also = append(also, best.Cause)
			d.Cause = r.cause
			best = d
			continue
		}
		if d.Cause == "" {
			// A rule of one cause leaves it to Classify; the Signature
			// rule and the family rules (NCCL's transports) name theirs.
			d.Cause = r.cause
		}
		if found {
			if r.cause != FatalError && !slices.Contains(also, d.Cause) && d.Cause != best.Cause {
				also = append(also, d.Cause)
			}
			continue
		}
		best, found = d, true
	}
	if !found {
		best = s.fallback()
	}
	best.Also = also
	best.Failure = best.Cause != Unknown && best.Cause != Healthy
	// A failure is known when a rule or a catalogue class named its
	// cause: not when only its fatal error is quoted, nor for vLLM's
	// wrapper error alone.
	best.Known = best.Failure && best.Cause != EngineCore && best.Cause != FatalError
	// The title, explanation and fix quote parsed values (addresses,
	// image names, URLs): no secret leaves through them either.
	best.Title, best.Explanation, best.Fix = redactProse(best.Title), redactProse(best.Explanation), redactProse(best.Fix)
	return best
}
