package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
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
func rules() []rule {
	return []rule{
		{GPURuntime, matchGPURuntime, buildGPURuntime},
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
		{NCCLInterface, matchNCCL, buildNCCL},
		{GlooInterface, matchGloo, buildGloo},
		{GlooMesh, matchGlooMesh, buildGlooMesh},
		{C10dUnreachable, matchC10d, buildC10d},
		{NCCLPeer, matchNCCLPeer, buildNCCLPeer},
		{NCCLSystem, matchNCCLSystem, buildNCCLSystem},
		{DuplicateNodeIP, matchDuplicateIP, buildDuplicateIP},
		{RayDriverNoGPU, matchDriverNoGPU, buildDriverNoGPU},
		{PlacementGroup, matchPG, buildPG},
		{FreeMemory, matchFreeMemory, buildFreeMemory},
		{RayOOM, matchRayOOM, buildRayOOM},
		{CUDAOOM, matchCUDAOOM, buildCUDAOOM},
		{ServeKilled, matchKilled, buildKilled},
		{EngineCore, matchEngineCore, buildEngineCore},
		{ReadyTimeout, matchAny, buildReadyTimeout},
	}
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

// ---- docker --gpus without the NVIDIA runtime -------------------------------

var gpuDriverRE = regexp.MustCompile(`could not select device driver "([^"]*)" with capabilities: \[\[gpu\]\]`)

func matchGPURuntime(b string) bool {
	return containsAny(b, "could not select device driver", "nvidia-container-cli: initialization error")
}

func buildGPURuntime(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	host := s.nodeOf(i)
	on := onHost(host)
	if !strings.Contains(s.lines[i].body, "could not select device driver") {
		return Diagnosis{
			Title:       "the NVIDIA container hook failed" + on + ": the driver is not usable",
			Evidence:    []Evidence{s.evidence(i)},
			Explanation: "Docker has the NVIDIA runtime, but nvidia-container-cli could not initialise NVML: the kernel driver is not loaded (or does not match the user-space libraries)" + on + ".",
			Fix:         "On " + orDefault(host, "the host") + ": make `nvidia-smi` work on the host first (load the driver, or reboot after a driver upgrade), then re-run rayform apply.",
		}, true
	}
	driver := "\"\""
	if m := gpuDriverRE.FindStringSubmatch(s.lines[i].body); m != nil {
		driver = strconv.Quote(m[1])
	}
	return Diagnosis{
		Title:    "docker" + on + " cannot give the container a GPU: no NVIDIA runtime",
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "`docker run --gpus all` asks Docker for a device driver with the \"gpu\" capability and Docker has none registered (driver " + driver + "): " +
			"the NVIDIA Container Toolkit is not installed, or not configured in /etc/docker/daemon.json" + on + ". Nothing started.",
		Fix: "On " + orDefault(host, "the host") + ": install nvidia-container-toolkit, then\n" +
			"  sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker\n" +
			"Check: docker run --rm --gpus all " + s.ctx.imageRef() + " nvidia-smi",
	}, true
}

// onHost is " on spark1", or "" when the host is unknown.
func onHost(h string) string {
	if h == "" {
		return ""
	}
	return " on " + h
}

// ---- image pull -------------------------------------------------------------

var (
	pullPlatformRE = regexp.MustCompile(`no matching manifest for (\S+?)\.? in the manifest list entries`)
	pullDeniedRE   = regexp.MustCompile(`pull access denied for ([^,\s]+)`)
	pullManifestRE = regexp.MustCompile(`manifest for (\S+) not found`)
	pullRegistryRE = regexp.MustCompile(`Get "?(https?://([^/"\s]+)/v2/[^"\s]*)"?: (.*)`)
	pullNoImageRE  = regexp.MustCompile(`No such image: (\S+)`)
	pullLocalRE    = regexp.MustCompile(`Unable to find image '([^']+)' locally`)
	netReasonRE    = regexp.MustCompile(`connection refused|i/o timeout|no such host|Client\.Timeout exceeded|network is unreachable|no route to host|server misbehaving|TLS handshake timeout`)
)

func matchImagePull(b string) bool {
	switch {
	case containsAny(b, "no matching manifest for", "pull access denied for", "manifest unknown",
		"server gave HTTP response to HTTPS client", "toomanyrequests", "No such image: "):
		return true
	case pullManifestRE.MatchString(b):
		return true
	case strings.Contains(b, "Error response from daemon") && containsAny(b, "unauthorized: authentication required", "denied: requested access to the resource is denied"):
		return true
	case pullRegistryRE.MatchString(b) && netReasonRE.MatchString(b):
		return true
	}
	return false
}

func buildImagePull(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	b := s.lines[i].body
	host := s.nodeOf(i)
	on := onHost(host)
	img := s.ctx.Image
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		if m := pullLocalRE.FindStringSubmatch(s.lines[j].body); m != nil {
			img = m[1]
			break
		}
	}
	ev := []Evidence{s.evidence(i)}
	d := Diagnosis{Evidence: ev}
	imgName := orDefault(img, "the image")
	check := "Check from " + orDefault(host, "the host") + ": docker manifest inspect " + orDefault(img, "<image>")
	switch {
	case pullPlatformRE.MatchString(b):
		plat := pullPlatformRE.FindStringSubmatch(b)[1]
		d.Title = imgName + " has no " + plat + " variant" + on
		d.Explanation = "The tag exists, but its manifest list has no entry for this host's platform " + plat + " (DGX Spark and GH200 are ARM64): an image built only for amd64 cannot run here."
		d.Fix = "Use an ARM64 or multi-arch build of the image in image on " + s.ctx.cluster() + " (for GB10 / DGX Spark, an image built for it).\n" + check
	case pullDeniedRE.MatchString(b):
		repo := pullDeniedRE.FindStringSubmatch(b)[1]
		d.Title = "cannot pull " + repo + on + ": the repository does not exist or needs docker login"
		d.Explanation = "The registry refused the pull of " + repo + ": either the name is wrong (a typo, a missing registry host or namespace) or the repository is private and this host is not logged in."
		d.Fix = "Check the image name on " + s.ctx.cluster() + "; if it is private, run `docker login <registry>` on every node (rayform reads credentials from each host's Docker config).\n" + check
	case pullManifestRE.MatchString(b) || strings.Contains(b, "manifest unknown"):
		ref := imgName
		if m := pullManifestRE.FindStringSubmatch(b); m != nil {
			ref = m[1]
		}
		d.Title = ref + " does not exist in the registry (manifest unknown)"
		d.Explanation = "The repository exists but has no tag or digest " + ref + "; many repositories publish no \"latest\"."
		d.Fix = "Set image on " + s.ctx.cluster() + " to a published tag (pin a version or a digest).\n" + check
	case strings.Contains(b, "server gave HTTP response to HTTPS client"):
		reg := "the registry"
		if m := pullRegistryRE.FindStringSubmatch(b); m != nil {
			reg = m[2]
		}
		d.Title = "registry " + reg + " speaks plain HTTP; docker" + on + " requires HTTPS"
		d.Explanation = "Docker pulls over HTTPS unless the registry is listed as insecure; " + reg + " answered with plain HTTP."
		d.Fix = "Serve the registry with TLS, or add it on every node to /etc/docker/daemon.json and restart Docker:\n  {\"insecure-registries\": [\"" + reg + "\"]}"
	case strings.Contains(b, "toomanyrequests"):
		d.Title = "the registry rate-limited the pull" + on
		d.Explanation = "The registry answered toomanyrequests: anonymous pulls are rate limited per source IP."
		d.Fix = "Run `docker login` on every node, or pull through a mirror (registry-mirrors in /etc/docker/daemon.json)."
	case containsAny(b, "unauthorized: authentication required", "denied: requested access to the resource is denied"):
		d.Title = "the registry refused the pull of " + imgName + on + ": not authorised"
		d.Explanation = "The registry requires credentials for " + imgName + " and this host has none (or wrong ones)."
		d.Fix = "Run `docker login <registry>` on every node."
	case pullNoImageRE.MatchString(b):
		ref := pullNoImageRE.FindStringSubmatch(b)[1]
		d.Title = ref + " is not present" + on
		d.Explanation = "Docker was told not to pull and the image is not in the local store of this host."
		d.Fix = "Pull it on every node (docker pull " + ref + "), or let rayform pull it."
	default:
		m := pullRegistryRE.FindStringSubmatch(b)
		reason := netReasonRE.FindString(b)
		reg := "the registry"
		if m != nil {
			reg = m[2]
		}
		d.Title = "registry " + reg + " is unreachable" + on + " (" + reason + ")"
		d.Explanation = "Docker could not reach " + reg + " to pull " + imgName + ": " + reason + ". The host has no route, DNS or proxy path to the registry, or the registry is down."
		d.Fix = "Make " + reg + " reachable from " + orDefault(host, "the host") + " (check: curl -sv https://" + reg + "/v2/), configure a registry mirror, or copy the image: docker save " + orDefault(img, "<image>") + " | ssh " + orDefault(host, "<host>") + " docker load"
	}
	return d, true
}

// ---- Ray missing from the image ---------------------------------------------

var rayMissingRE = regexp.MustCompile(`(?:^|[\s:/])ray: (?:command )?not found|exec: \\?"ray\\?": executable file not found|No module named '?ray'?(?:$|[^.\w])|Failed to import Ray`)

func matchRayMissing(b string) bool {
	return containsAny(b, "ray", "Ray") && rayMissingRE.MatchString(b)
}

func buildRayMissing(s *scan, hits []int) (Diagnosis, bool) {
	// vLLM warns "Failed to import Ray ... For distributed inference, please
	// install Ray" on every start without Ray; a single-node run does not
	// need it. The warning alone is a cause only where the deployment runs
	// on Ray (rayform's context says so).
	var strong []int
	for _, j := range hits {
		if !strings.Contains(s.lines[j].body, "Failed to import Ray") {
			strong = append(strong, j)
		}
	}
	if len(strong) == 0 && !s.ctx.onRay() {
		return Diagnosis{}, false
	}
	i := hits[0]
	if len(strong) > 0 {
		i = strong[0]
	}
	host := s.nodeOf(i)
	img := s.ctx.image()
	return Diagnosis{
		Title:    img + " has no Ray" + onHost(host),
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "rayform runs `ray start` inside the image, and vLLM's Ray executor imports ray; this image has neither the ray CLI nor the Python module. " +
			"vLLM dropped ray from its dependencies (0.19.1; official images since about 0.18), so a stock vLLM image no longer ships it.",
		Fix: "Use an image that ships Ray, or extend this one and set image on " + s.ctx.cluster() + " to the result (the same image on every node, so head and workers run the same Ray):\n" +
			"  FROM " + orDefault(s.ctx.Image, "<image>") + "\n" +
			"  RUN pip install 'ray[default]'\n" +
			"Check: docker run --rm --entrypoint ray <image> --version",
	}, true
}

// ---- Ray worker cannot reach the GCS ----------------------------------------

var (
	gcsAddrRE   = regexp.MustCompile(`GCS (?:at address|at|server address was) (\[?[0-9A-Za-z.\-:]*?\]?:\d+)`)
	localNodeRE = regexp.MustCompile(`Local node IP: (\S+)`)
)

func matchGCS(b string) bool {
	return containsAny(b, "Failed to connect to GCS at address", "Unable to connect to GCS at",
		"Failed to get cluster ID from GCS server", "Timed out while waiting for GCS to become available",
		"Couldn't reconnect to GCS server")
}

func buildGCS(s *scan, hits []int) (Diagnosis, bool) {
	// A connection retried until "Ray runtime started" is not a failure.
	started := make([]int, len(s.logs)) // per log, the last such line, or -1
	for k := range started {
		started[k] = -1
	}
	for j, l := range s.lines {
		if strings.Contains(l.body, "Ray runtime started") {
			started[l.log] = j
		}
	}
	var live []int
	for _, i := range hits {
		if started[s.lines[i].log] < i {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return Diagnosis{}, false
	}
	i := live[0]
	for _, j := range live {
		if gcsAddrRE.MatchString(s.lines[j].body) {
			i = j
			break
		}
	}
	worker := s.nodeOf(i)
	ev := []Evidence{s.evidence(i)}
	for _, j := range live {
		if j != i && s.lines[j].log == s.lines[i].log && !gcsAddrRE.MatchString(s.lines[j].body) {
			ev = append(ev, s.evidence(j))
			break
		}
	}
	var localIP string
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		if m := localNodeRE.FindStringSubmatch(s.lines[j].body); m != nil {
			localIP = m[1]
			break
		}
	}
	addr, host, port := "", "", ""
	if m := gcsAddrRE.FindStringSubmatch(s.lines[i].body); m != nil {
		addr = m[1]
		k := strings.LastIndexByte(addr, ':')
		host, port = strings.Trim(addr[:k], "[]"), addr[k+1:]
	}
	d := Diagnosis{Evidence: ev}
	target := "the head's GCS"
	if addr != "" {
		target = "the GCS at " + addr
	}
	d.Title = "the Ray worker" + onHost(worker) + " cannot reach " + target
	var why []string
	c := s.ctx
	headIP := c.NodeAddrs[c.HeadNode]
	in, known := c.inFabric(host)
	switch {
	case addr != "" && host == "":
		why = append(why, "The address has no host part: the head address was empty when `ray start --address` ran (an unset variable).")
	case strings.HasPrefix(host, "127.") || host == "localhost":
		why = append(why, host+" is the worker's own loopback: the head address was not passed to the worker.")
	case known && !in:
		o := c.ownerOf(host)
		what := host + " is outside the fabric " + c.FabricCIDR.String()
		if o.node != "" {
			what += "; it is " + o.describe()
		}
		why = append(why, what+". The worker was pointed at an address it cannot route to; on this topology nodes reach each other only over the fabric.")
	case known && in:
		why = append(why, host+" is inside the fabric "+c.FabricCIDR.String()+", so the route is right but nothing answered on port "+port+
			": the head's GCS is not running (read the head's ray log), a firewall drops the port on the fabric, or the worker's Ray version differs from the head's.")
	}
	if localIP != "" {
		if lin, lknown := c.inFabric(localIP); lknown && !lin {
			why = append(why, "The worker itself chose "+localIP+" (\"Local node IP\"), outside the fabric: it was started without --node-ip-address.")
		} else {
			why = append(why, "The worker chose "+localIP+" as its own address (\"Local node IP\").")
		}
	}
	if len(why) == 0 {
		why = append(why, "The worker could not open a connection to the head's GCS within Ray's timeout.")
	}
	d.Explanation = strings.Join(why, "\n")
	if known && in {
		d.Fix = "Check the head first: is its Ray container running and listening on " + addr + " (`ss -ltn` on the head)? Allow TCP from " + c.FabricCIDR.String() +
			" in the head's firewall, and use the same image (the same Ray version) on every node."
		return d, true
	}
	gcsPort := strconv.Itoa(c.rayPort())
	if c.RayPort == 0 && port != "" {
		gcsPort = port // no configuration: the port the worker was given
	}
	fix := "Start the worker with the head's fabric address: ray start --address=" + orDefault(headIP, "<head fabric IP>") + ":" + gcsPort
	if wip := c.NodeAddrs[worker]; wip != "" {
		fix += " --node-ip-address=" + wip
	}
	d.Fix = fix + " (rayform derives both from network = " + orDefault(c.Network, "network.<fabric>") + " on " + c.cluster() + ")."
	return d, true
}

// ---- NCCL / Gloo interface not found ----------------------------------------

var (
	ncclIfRE = regexp.MustCompile(`NCCL_SOCKET_IFNAME set (?:by environment )?to (\S+)`)
	glooIfRE = regexp.MustCompile(`Unable to find address for: (\S+)`)
)

func matchNCCL(b string) bool {
	return containsAny(b, "no socket interface found", "is neither AF_INET(2) nor AF_INET6(10)")
}

func buildNCCL(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	host := s.nodeOf(i)
	ev := []Evidence{s.evidence(i)}
	iface := ""
	lo, _ := s.logSpan(i)
	for j := lo; j <= i; j++ {
		if m := ncclIfRE.FindStringSubmatch(s.lines[j].body); m != nil {
			iface = m[1]
			ev = append([]Evidence{s.evidence(j)}, ev...)
		}
	}
	d := Diagnosis{Evidence: ev}
	if iface == "" {
		d.Title = "NCCL found no usable socket interface" + onHost(host)
		d.Explanation = "NCCL's bootstrap needs an interface matching NCCL_SOCKET_IFNAME (default ^lo,docker); none matched in the container's network namespace. NCCL ≤ 2.27.7 fails silently here and later reports an address of an unknown family."
	} else {
		d.Title = "NCCL_SOCKET_IFNAME=" + iface + " matches no interface" + onHost(host)
		d.Explanation = "NCCL_SOCKET_IFNAME is a list of name prefixes (\"=name\" for an exact name, \"^\" to exclude); " + iface + " matches no interface in the container's network namespace, so NCCL's bootstrap has no address to listen on."
	}
	d.Explanation += ifaceHint(s.ctx, iface, "NCCL")
	d.Fix = ifaceFix(s.ctx, host, "NCCL_SOCKET_IFNAME") +
		"\nIf the names differ per host, keep NCCL_* out of vLLM's copying of the head's environment to workers ($VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json), or a head value overwrites the worker's."
	return d, true
}

func matchGloo(b string) bool { return strings.Contains(b, "Unable to find address for: ") }

func buildGloo(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	host := s.nodeOf(i)
	iface := glooIfRE.FindStringSubmatch(s.lines[i].body)[1]
	return Diagnosis{
		Title:    "GLOO_SOCKET_IFNAME=" + iface + " matches no interface" + onHost(host),
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "torch's Gloo backend looks the interface named by GLOO_SOCKET_IFNAME up by exact name; " + iface + " has no address in the container's network namespace." +
			ifaceHint(s.ctx, iface, "Gloo"),
		Fix: ifaceFix(s.ctx, host, "GLOO_SOCKET_IFNAME") +
			"\nvLLM does not copy GLOO_* to Ray workers, so every container must carry its own value.",
	}, true
}

// ifaceHint compares the configured interface with the declared fabric one.
func ifaceHint(c Context, iface, lib string) string {
	if c.FabricInterface == "" || iface == "" {
		return ""
	}
	bare := strings.TrimLeft(iface, "=^")
	switch {
	case bare == c.FabricInterface || strings.HasPrefix(c.FabricInterface, bare):
		h := "\nThe value names the fabric interface " + c.FabricInterface + ", so the interface is missing inside the container: it must run with --network host, or the name differs on this host (a cable in the other port)."
		if strings.HasPrefix(iface, "=") && lib == "NCCL" {
			h += " Some NCCL builds match nothing with the exact \"=\" form; try the plain name."
		}
		return h
	default:
		return "\nThe fabric interface is " + c.FabricInterface + "."
	}
}

// ifaceFix sets the variable to the fabric interface.
func ifaceFix(c Context, host, env string) string {
	name := orDefault(c.FabricInterface, "<fabric interface>")
	on := orDefault(host, "each host")
	return "Set interface on " + c.network() + " to the name that exists on " + on + " (`ip -br addr` there; a per-host map if names differ) — rayform passes it as " + env +
		" in each node's container, before ray start. By hand: " + env + "=" + name + " in every container."
}

// ---- c10d master unreachable ------------------------------------------------

var (
	c10dAnyRE     = regexp.MustCompile(`network address of \(([^,()]+), (\d+)\)`)
	c10dHostRE    = regexp.MustCompile(`to host (\[[^\]]+\]|[^\s:]+):(\d+)`)
	c10dTimeoutRE = regexp.MustCompile(`while trying to connect to \(([^,()]+), (\d+)\)`)
	c10dErrnoRE   = regexp.MustCompile(`errno: (\d+) - ([^)]+)\)`)
	c10dClientsRE = regexp.MustCompile(`waiting for clients\. (\d+)/(\d+) clients joined`)
)

func matchC10d(b string) bool {
	return containsAny(b, "failed to connect to any network address of (", "TCP client failed to connect/validate to host",
		"The client socket has timed out after") || c10dClientsRE.MatchString(b)
}

// c10dRetryRE is TCPStore's retry line; c10dFinalRE its giving up.
var (
	c10dRetryRE = regexp.MustCompile(`retrying \(try=(\d+)`)
	c10dFinalRE = regexp.MustCompile(`timed out \(try=\d+|DistNetworkError|The client socket has timed out after|clients joined`)
)

// c10dRoutine reports whether the c10d lines of hits are the routine first
// refusals of a client that starts before its master listens: a retry at
// try=0 or 1, connection refused, and no giving up. A serve stopped then
// (ready_timeout, killed) leaves exactly these lines.
func c10dRoutine(s *scan, hits []int) bool {
	maxTry := -1
	for _, j := range hits {
		b := s.lines[j].body
		if c10dFinalRE.MatchString(b) {
			return false
		}
		if m := c10dRetryRE.FindStringSubmatch(b); m != nil {
			if n, _ := strconv.Atoi(m[1]); n > maxTry {
				maxTry = n
			}
		}
	}
	if maxTry < 0 || maxTry >= 2 {
		return false
	}
	for j := range s.lines {
		if m := c10dErrnoRE.FindStringSubmatch(s.lines[j].body); m != nil && strings.Contains(s.lines[j].body, "[c10d]") && m[1] != "111" {
			return false // no route, timeout: never routine
		}
	}
	return true
}

func buildC10d(s *scan, hits []int) (Diagnosis, bool) {
	if c10dRoutine(s, hits) {
		return Diagnosis{}, false
	}
	i := hits[0]
	for _, j := range hits {
		if strings.Contains(s.lines[j].body, "network address of (") {
			i = j
			break
		}
	}
	b := s.lines[i].body
	var ip, port string
	for _, re := range []*regexp.Regexp{c10dAnyRE, c10dHostRE, c10dTimeoutRE} {
		if m := re.FindStringSubmatch(b); m != nil {
			ip, port = strings.Trim(m[1], "[] "), m[2]
			break
		}
	}
	ev := []Evidence{s.evidence(i)}
	errno, errText := "", ""
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		if m := c10dErrnoRE.FindStringSubmatch(s.lines[j].body); m != nil && strings.Contains(s.lines[j].body, "[c10d]") {
			errno, errText = m[1], strings.TrimSpace(m[2])
			if j != i {
				ev = append(ev, s.evidence(j))
			}
			break
		}
	}
	from := s.nodeOf(i)
	c := s.ctx
	d := Diagnosis{Evidence: ev}
	if ip == "" {
		if m := c10dClientsRE.FindStringSubmatch(b); m != nil {
			d.Title = "the c10d master" + onHost(from) + " timed out waiting for workers (" + m[1] + "/" + m[2] + " clients joined)"
			d.Explanation = "The TCPStore master listened, but the other ranks never connected: they were given an address they cannot reach, or never started. Their own logs show the address they tried."
			d.Fix = c.bindingFix("")
			return d, true
		}
		d.Title = "a torch.distributed client" + onHost(from) + " cannot reach the c10d master"
		d.Explanation = "The TCPStore rendezvous failed; the log does not show the master address."
		d.Fix = c.bindingFix("")
		return d, true
	}
	master := ip + ":" + port
	d.Title = "vLLM's c10d master " + master + " is unreachable"
	if from != "" {
		d.Title += " from " + from
	}
	var why []string
	errWhy := ""
	if errno != "" {
		errWhy = " (errno " + errno + ": " + errText + ")"
	}
	o := c.ownerOf(ip)
	switch in, known := c.inFabric(ip); {
	case ip == "0.0.0.0" || strings.HasPrefix(ip, "127."):
		why = append(why, ip+" is not a routable address: vLLM's get_ip() found no usable address and fell back. Set VLLM_HOST_IP on every node.")
	case known && !in:
		w := ip + " is outside the fabric " + c.FabricCIDR.String()
		if o.node != "" {
			w += ": it is " + o.describe()
		}
		why = append(why, w+". vLLM takes the c10d master address from the head's Ray node IP (RayExecutorV2) or from VLLM_HOST_IP / the default-route address (classic executor). "+
			"Neither was bound to the fabric, so Ray registered the head under its management address, which "+orDefault(from, "the worker")+" cannot reach"+errWhy+".")
		d.Fix = c.bindingFix(ip)
	case known && in:
		w := ip + " is inside the fabric " + c.FabricCIDR.String()
		if o.node != "" {
			w += " (" + o.describe() + ")"
		}
		w += ", so the binding is right but the connection failed" + errWhy + ": "
		switch errno {
		case "111":
			w += "nothing listens on port " + port + " — the master process had already exited (read the head's log above this line)."
			d.consequence = true
		case "101", "113":
			w += "no route — the fabric interface is down or has no address on one side."
		default:
			w += "the port is filtered (a firewall on the fabric; c10d uses a random port per run, so allow TCP from " + c.FabricCIDR.String() + "), or the master process exited."
		}
		why = append(why, w)
		d.Fix = "Check the fabric path from " + orDefault(from, "the worker") + ": ping " + ip + "; allow TCP from " + c.FabricCIDR.String() + " on " + orDefault(o.node, "the head") +
			"'s firewall (c10d ports are random); if the head's vLLM exited first, its log shows why."
	default:
		why = append(why, orDefault(from, "The worker")+" could not open a TCP connection to "+master+errWhy+". Declare the fabric network so rayform can tell whether this is the wrong address.")
		d.Fix = c.bindingFix(ip)
	}
	d.Explanation = strings.Join(why, "\n")
	return d, true
}

// ---- NCCL peer lost rank 0 -------------------------------------------------

var (
	ncclUniqueIDRE = regexp.MustCompile(`\[(\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[0\] via c10d key-value store by key '([^']*)', but store->get\('[^']*'\) got (?:error|exception): (.*)`)
	rankTagRE      = regexp.MustCompile(`^\[rank(\d+)\]:`)
)

func matchNCCLPeer(b string) bool {
	return ncclUniqueIDRE.MatchString(b) || (strings.Contains(b, "recvValueWithTimeout failed") && strings.Contains(b, "Connection was likely closed"))
}

func buildNCCLPeer(s *scan, hits []int) (Diagnosis, bool) {
	var ev []Evidence
	rank, got := "", ""
	first := hits[0]
	for _, j := range hits {
		if m := ncclUniqueIDRE.FindStringSubmatch(s.lines[j].body); m != nil && rank == "" {
			rank, got = m[1], m[3]
			first = j
		}
	}
	ev = append(ev, s.evidence(first))
	for _, j := range hits {
		if j != first && len(ev) < 3 && !ncclUniqueIDRE.MatchString(s.lines[j].body) {
			ev = append(ev, s.evidence(j))
		}
	}
	if rank == "" {
		if m := rankTagRE.FindStringSubmatch(s.lines[first].text); m != nil {
			rank = m[1]
		}
	}
	host := s.nodeOf(first)
	c := s.ctx
	who := "a rank"
	if rank != "" {
		who = "rank " + rank
	}
	head := orDefault(c.HeadNode, "the head")
	d := Diagnosis{
		Title:    who + onHost(host) + " lost rank 0 while setting up NCCL: rank 0" + onHost(c.HeadNode) + " exited first",
		Evidence: ev,
		Explanation: "Rank 0 creates NCCL's unique id and serves it to the other ranks from the c10d key-value store it hosts. " + who + " was reading it when the connection closed " +
			"(\"Failed to recv, got 0 bytes. Connection was likely closed\"): rank 0's process had ended. This line is the consequence; the cause is in rank 0's log on " + head +
			" (the vllm serve log and the Ray head container), which rayform could not classify.",
		Fix:         "Read rank 0's log on " + head + " (`docker logs` of the head container, the vllm serve log) for the first error; an NCCL or Gloo interface name, the memory monitor, or CUDA memory are the usual causes.",
		consequence: true,
	}
	if strings.Contains(got, "wait timeout") || strings.Contains(got, "Socket Timeout") || strings.Contains(got, "Timeout waiting") {
		d.Title = who + onHost(host) + " timed out waiting for rank 0's NCCL id: rank 0" + onHost(c.HeadNode) + " never published it"
		d.Explanation = "Rank 0 creates NCCL's unique id and publishes it in the c10d store; " + who + " waited the whole timeout (" + got + "). Rank 0 hung or failed before NCCL's bootstrap (its log on " + head + " shows where)."
	}
	return d, true
}

// ---- duplicate node IP ------------------------------------------------------

var (
	dupIPRE = regexp.MustCompile(`Got (\d+) nodes with node ids \[[^\]]*\] and (\d+) unique IP addresses (\{[^}]*\})`)
	ipv4RE  = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}\b`)
)

func matchDuplicateIP(b string) bool {
	return strings.Contains(b, "Every node should have a unique IP address")
}

func buildDuplicateIP(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	b := s.window(i, 2)
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}, Fix: s.ctx.bindingFix("")}
	m := dupIPRE.FindStringSubmatch(b)
	if m == nil {
		d.Title = "vLLM's Ray executor saw mixed node addresses"
		d.Explanation = "The number of unique IPs differs from the number of Ray nodes: Ray and VLLM_HOST_IP disagree on at least one node."
		return d, true
	}
	var addrs []string
	for _, ip := range ipv4RE.FindAllString(m[3], -1) {
		if desc := s.ctx.ownerOf(ip).describe(); desc != "" {
			addrs = append(addrs, ip+" ("+desc+")")
		} else {
			addrs = append(addrs, ip)
		}
	}
	d.Title = "vLLM saw " + m[2] + " addresses for " + m[1] + " Ray nodes"
	d.Explanation = "vLLM counts the driver's own IP (VLLM_HOST_IP, else the default-route address) with each worker's Ray node IP; it found " + strings.Join(addrs, ", ") +
		". A node appears under two addresses (or two under one), so Ray's registration and VLLM_HOST_IP disagree."
	return d, true
}

// ---- placement group --------------------------------------------------------

var (
	pgNodeRE  = regexp.MustCompile(`'node:([^']+)'`)
	pgSecsRE  = regexp.MustCompile(`for (\d+) seconds`)
	pgSpecsRE = regexp.MustCompile(`specs=(\[.*?\])`)
	pgNeedRE  = regexp.MustCompile(`requiring (\d+) GPUs`)
)

func matchPG(b string) bool {
	return containsAny(b, "Waiting for creating a placement group of specs", "Cannot provide a placement group",
		"No available node types can fulfill resource request")
}

func buildPG(s *scan, hits []int) (Diagnosis, bool) {
	first, last, final := hits[0], hits[0], -1
	for _, j := range hits {
		if strings.Contains(s.lines[j].body, "Cannot provide a placement group") && final < 0 {
			final = j
		}
		if strings.Contains(s.lines[j].body, "Waiting for creating") {
			last = j
		}
	}
	ev := []Evidence{s.evidence(first)}
	if final >= 0 && final != first {
		ev = append(ev, s.evidence(final))
	} else if last != first {
		ev = append(ev, s.evidence(last))
	}
	var node string
	gpus := 0
	for _, j := range hits {
		b := s.lines[j].body
		if m := pgNodeRE.FindStringSubmatch(b); m != nil && node == "" {
			node = m[1]
		}
		if m := pgSpecsRE.FindStringSubmatch(b); m != nil && gpus == 0 {
			gpus = strings.Count(m[1], "'GPU'")
		}
		if m := pgNeedRE.FindStringSubmatch(b); m != nil && gpus == 0 {
			gpus, _ = strconv.Atoi(m[1])
		}
	}
	waited := ""
	if m := pgSecsRE.FindStringSubmatch(s.lines[last].body); m != nil && strings.Contains(s.lines[last].body, "Waiting") {
		waited = m[1]
	}
	c := s.ctx
	d := Diagnosis{Evidence: ev}
	state := "waits"
	if final >= 0 {
		state = "timed out"
	}
	if node == "" {
		d.Title = fmt.Sprintf("vLLM's placement group for %d GPU bundles %s: the cluster has fewer free GPUs", gpus, state)
		d.Explanation = "No bundle is pinned to a node, so the group only needs free GPUs; Ray does not have them: a worker did not join (read its ray log), or a container sees no GPU (docker --gpus all; Ray's GPU count)."
		d.Fix = "Run `ray status` and `ray list nodes` on the head: every node must be ALIVE with its GPUs. tensor_parallel_size × pipeline_parallel_size on " + c.serve() + " must not exceed the GPUs of the cluster."
		return d, true
	}
	d.Title = "vLLM's placement group " + state + " for node:" + node + ", which no Ray node provides"
	if waited != "" && final < 0 {
		d.Title += " (" + waited + " s so far)"
	}
	o := c.ownerOf(node)
	lead := "vLLM pins its first bundle to node:<its own IP>, the IP vLLM's get_ip() returns on the head (VLLM_HOST_IP, else the default-route address). "
	switch {
	case o.kind == "management":
		f := c.NodeAddrs[o.node]
		d.Explanation = lead + node + " is " + o.describe() + ": VLLM_HOST_IP was not set there, while Ray registered " + o.node +
			" under " + orDefault(f, "another address") + ". Ray has no resource node:" + node + ", so the group waits (1800 s, then fails)."
		d.Fix = "Make vLLM and Ray agree on " + o.node + "'s address: VLLM_HOST_IP=" + orDefault(f, "<fabric IP>") + " in its container, the address Ray registered (verify with `ray list nodes`). " +
			"network = " + orDefault(c.Network, "network.<fabric>") + " on " + c.cluster() + " sets both."
	case o.kind == "fabric":
		m := c.MgmtAddrs[o.node]
		d.Explanation = lead + node + " is " + o.describe() + " (VLLM_HOST_IP), but Ray registered " + o.node + " under another address" +
			ifNotEmpty(" (probably its management address "+m+", picked from the default route when --node-ip-address is not given)", m) +
			". Ray has no resource node:" + node + ", so the group waits (1800 s, then fails)."
		d.Fix = c.bindingFix(node)
	case len(c.NodeAddrs) == 0 && len(c.MgmtAddrs) == 0:
		// Nothing declared to compare with (a hand-run deployment): say
		// what the lines show and how to compare, claim nothing more.
		d.Explanation = lead + "The group waits because no Ray node offers the resource node:" + node + ": Ray registered the node vLLM runs on under another address than " + node +
			" (Ray picks the default-route address when ray start has no --node-ip-address), or that node has not joined the cluster."
		d.Fix = "Compare the addresses: `ray list nodes` (or `ray status`) on the head shows the IP Ray registered each node under; vLLM used " + node + ". " +
			"Make them the same on every node: ray start --node-ip-address=<the node's IP on the network the nodes share> and VLLM_HOST_IP=<the same IP> in each node's environment, then restart Ray and vllm serve."
	default:
		d.Explanation = lead + node + " is not a declared address of any node, so Ray has no node with that resource."
		d.Fix = c.bindingFix(node)
	}
	return d, true
}

// ifNotEmpty returns s when cond is not empty.
func ifNotEmpty(s, cond string) string {
	if cond == "" {
		return ""
	}
	return s
}

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

// ---- engine core failed, nothing more specific -----------------------------

func matchEngineCore(b string) bool {
	return containsAny(b, "Engine core initialization failed", "EngineCore failed to start", "EngineDeadError", "EngineCore encountered an issue")
}

// maxEngineContext is how many meaningful lines before the wrapper error an
// EngineCore diagnosis shows.
const maxEngineContext = 8

func buildEngineCore(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	var before []int
	lo, _ := s.logSpan(i)
	for j := lo; j < i; j++ {
		if !matchEngineCore(s.lines[j].body) {
			before = append(before, j)
		}
	}
	ev := []Evidence{s.evidence(i)}
	for _, j := range s.tail(before, maxEngineContext) {
		ev = append(ev, s.evidence(j))
	}
	host := s.host(i)
	return Diagnosis{
		Title:    "vLLM's engine core failed to start" + onHost(host) + "; no known root cause in the logs",
		Evidence: ev,
		Explanation: "\"Engine core initialization failed\" is vLLM's wrapper: the cause is printed before it, by the engine core or a Ray worker (possibly in another host's log). " +
			"The lines that say something just before it are shown; none matched a failure rayform knows.",
		Fix: "Read the log above the wrapper error in full (`docker logs` of the vLLM container" + onHost(host) + ") and the Ray workers' logs on the other nodes; the first exception there is the cause.",
	}, true
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
