package diagnose

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ---- Gloo's full mesh: a rank advertised an address others cannot reach -------

var (
	// gloo's pair.cc: "connect [127.0.1.1]:60817: Connection refused",
	// newer: "Connection refused, remote=[127.0.1.1]:20901".
	glooPeerRE = regexp.MustCompile(`(?:connect |remote=)\[([0-9A-Fa-f.:]+)\]:(\d+)`)
)

func matchGlooMesh(b string) bool {
	return strings.Contains(b, "connectFullMesh failed") ||
		(strings.Contains(b, "gloo/transport/tcp/pair.cc") && glooPeerRE.MatchString(b))
}

func buildGlooMesh(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	peer, port := "", ""
	for _, j := range hits {
		if m := glooPeerRE.FindStringSubmatch(s.lines[j].body); m != nil {
			i, peer, port = j, m[1], m[2]
			break
		}
	}
	host := s.nodeOf(i)
	c := s.ctx
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}}
	env := "GLOO_SOCKET_IFNAME=" + orDefault(c.FabricInterface, "<the interface on the network the nodes share>")
	hosts := "check on every node with `getent hosts $(hostname)`: it must print the node's address on the shared network, not 127.0.1.1 (Debian and Ubuntu map the hostname to 127.0.1.1 in /etc/hosts)"
	if strings.HasPrefix(peer, "127.") || peer == "::1" {
		d.Title = "Gloo on a peer advertised the loopback address " + peer + "; " + orDefault(host, "this rank") + " cannot reach it"
		d.Explanation = "Gloo's full mesh connects every rank to the address each other rank advertised in the store. Without GLOO_SOCKET_IFNAME, Gloo takes the address its hostname resolves to; " +
			"on that node it resolved to " + peer + ", so every remote rank dialled its own loopback (port " + port + ") and was refused."
		d.Fix = "Pin Gloo to the shared network on every node: " + env + " in the environment of every rank (rayform sets it from interface on " + c.network() +
			"; by hand: -e on each container, before ray start, since vLLM does not copy GLOO_* to Ray workers), or fix name resolution: " + hosts + "."
		return d, true
	}
	if w := s.glooFallback(); w >= 0 {
		// torch's ProcessGroupGloo bound a rank to the loopback address
		// because the hostname resolved to no local address; across nodes
		// no other rank can reach that rank there.
		// The rank that fell back: its Ray ip= tag (a worker on another
		// node prints into the serve's log), else the log's host.
		where := s.host(w)
		if m := ipTagRE.FindStringSubmatch(s.lines[w].text); m != nil {
			where = orDefault(c.ownerOf(m[1]).node, m[1])
		}
		d.Evidence = []Evidence{s.evidence(w), s.evidence(i)}
		d.Title = "Gloo on " + orDefault(where, "a rank") + " fell back to the loopback address; the ranks on other nodes cannot reach it"
		d.Explanation = "torch printed \"Unable to resolve hostname to a (local) address. Using the loopback address as fallback\": with no GLOO_SOCKET_IFNAME in that rank's environment, Gloo binds the address the hostname resolves to, and on that node it resolved to no address Gloo could bind, so the rank bound and advertised 127.0.0.1. " +
			"Gloo's full mesh connects every rank to every other, so the mesh failed (\"no error\" is Gloo's text). If GLOO_SOCKET_IFNAME was set, it did not reach that rank: set only in the shell of vllm serve, it is not in the environment of Ray's workers on the other nodes."
		d.Fix = "Pin Gloo to the shared network on every node: " + env + " in the environment of every rank (rayform sets it from interface on " + c.network() +
			"; by hand: -e on each container, before ray start, since vLLM does not copy GLOO_* to Ray workers), or make the hostname resolve: " + hosts + "."
		return d, true
	}
	d.Title = "Gloo could not connect its ranks into a full mesh" + onHost(host)
	d.Explanation = "Gloo's full mesh connects every rank to the address each other rank advertised; this rank could not connect to (or handshake with) at least one of them, and torch printed no address (\"no error\" is Gloo's text). " +
		"Usually a rank advertised an address the others cannot reach — its hostname resolving to 127.0.1.1, or an interface of another network — and otherwise a firewall between the nodes or a peer that exited first (read every rank's log)."
	d.Fix = "Pin Gloo to the shared network on every node: " + env + " in the environment of every rank (by hand: -e on each container, before ray start; vLLM does not copy GLOO_* to Ray workers); " +
		hosts + "; allow TCP between the nodes on that network."
	d.consequence = true // a peer that died leaves the same line
	return d, true
}

// glooFallbackRE is torch's warning when ProcessGroupGloo binds loopback.
var glooFallbackRE = regexp.MustCompile(`Unable to resolve hostname to a \(local\) address\. Using the loopback address as fallback`)

// multiAddrRE finds the addresses a log names for its ranks: Ray's "ip="
// tag and vLLM's distributed_init_method.
var multiAddrRE = regexp.MustCompile(`\bip=(\d+\.\d+\.\d+\.\d+)[,)]|tcp://(\d+\.\d+\.\d+\.\d+):\d+`)

// glooFallback returns the line of torch's loopback-fallback warning when
// the run spans nodes, else -1. On one node loopback works (every rank is
// local) and the warning is printed by runs that succeed, so it is evidence
// only when the configuration or the logs show more than one address.
func (s *scan) glooFallback() int {
	w := -1
	addrs := map[string]bool{}
	for j, l := range s.lines {
		if w < 0 && glooFallbackRE.MatchString(l.text) {
			w = j
		}
		for _, m := range multiAddrRE.FindAllStringSubmatch(l.text, -1) {
			if a := m[1] + m[2]; !strings.HasPrefix(a, "127.") {
				addrs[a] = true
			}
		}
	}
	if w < 0 || (len(s.ctx.NodeAddrs) < 2 && len(addrs) < 2) {
		return -1
	}
	return w
}

// ---- NCCL "unhandled system error" ---------------------------------------------

var ncclWarnRE = regexp.MustCompile(`NCCL WARN (.+)`)

func matchNCCLSystem(b string) bool {
	return containsAny(b, "unhandled system error", "ncclSystemError")
}

func buildNCCLSystem(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	for _, j := range hits {
		if strings.Contains(s.lines[j].body, "unhandled system error") {
			i = j
			break
		}
	}
	host := s.nodeOf(i)
	c := s.ctx
	ev := []Evidence{s.evidence(i)}
	// NCCL's own account, when NCCL_DEBUG was on: its WARN lines, and the
	// line after "Last error:".
	var warns []string
	lo, hi := s.logSpan(i)
	for j := lo; j < hi && len(ev) < 4; j++ {
		b := s.lines[j].body
		if m := ncclWarnRE.FindStringSubmatch(b); m != nil {
			ev = append(ev, s.evidence(j))
			warns = append(warns, strings.TrimSpace(m[1]))
		}
		if strings.TrimSpace(b) == "Last error:" && j+1 < hi && !s.noise[j+1] && len(ev) < 4 {
			if nb := strings.TrimSpace(s.lines[j+1].body); nb != "" && !strings.HasPrefix(nb, "Exception raised from") {
				ev = append(ev, s.evidence(j+1))
				warns = append(warns, nb)
			}
		}
	}
	d := Diagnosis{
		Title:    "NCCL failed a system call" + onHost(host) + " (\"unhandled system error\")",
		Evidence: ev,
	}
	if len(warns) > 0 {
		d.Explanation = "NCCL reports a failed socket, memory or device call as \"unhandled system error\"; its own lines name the call: " + strings.Join(warns, "; ") + "."
	} else {
		d.Explanation = "NCCL reports a failed socket, memory or device call as \"unhandled system error\" and says which only at a higher log level: these logs do not show which call failed, so rayform does not guess. " +
			"Common causes: NCCL_SOCKET_IFNAME matching no usable interface or an interface of another network, a container /dev/shm too small for NCCL's buffers, InfiniBand/RoCE devices missing inside the container, a firewall between the nodes."
	}
	d.Fix = "Run again with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET in the environment of every rank — on the containers (rayform: env on " + c.cluster() +
		"; by hand: -e on each docker run, before ray start), not only in the shell of vllm serve — and read the first \"NCCL WARN\" line on each node: it names the failed call. " +
		"Then: set NCCL_SOCKET_IFNAME to the interface of the shared network; run the containers with --ipc=host or a larger --shm-size; for RDMA pass the devices (--device /dev/infiniband, or --privileged)."
	return d, true
}

// ---- vLLM started its own Ray instead of joining the cluster -------------------

var (
	// Lines that say the Ray vLLM joined has fewer GPUs than it needs.
	rayShortRE = regexp.MustCompile(`The number of required GPUs exceeds the total number of available GPUs|Waiting for creating a placement group|Cannot provide a placement group|No available node types can fulfill resource request|Ray does not allocate any GPUs on the driver node`)
)

func matchRayLocal(b string) bool { return strings.Contains(b, "Started a local Ray instance") }

func buildRayLocal(s *scan, hits []int) (Diagnosis, bool) {
	// A local Ray is a failure only when vLLM then lacks GPUs in it: a
	// single-node run starts its own Ray on purpose.
	i := hits[0]
	short := -1
	_, hi := s.logSpan(i)
	for j := i + 1; j < hi && short < 0; j++ {
		if !s.noise[j] && rayShortRE.MatchString(s.lines[j].body) {
			short = j
		}
	}
	if short < 0 {
		return Diagnosis{}, false
	}
	host := s.nodeOf(i)
	c := s.ctx
	head := orDefault(c.NodeAddrs[c.HeadNode], "<head IP>")
	join := "run vllm serve inside the container where `ray start --head` ran (rayform does: `docker exec` into the head's Ray container), or set RAY_ADDRESS=" + head + ":" + strconv.Itoa(c.rayPort()) +
		" in its environment; `ray status` in the same shell must list every node and its GPUs before vllm serve starts."
	d := Diagnosis{Evidence: []Evidence{s.evidence(i), s.evidence(short)}}
	if len(c.NodeAddrs) > 1 {
		// The configuration spans nodes: the serve had to join their cluster.
		d.Title = "vLLM started its own local Ray" + onHost(host) + " instead of joining the cluster of " + strings.Join(sortedKeys(c.NodeAddrs), ", ") + ", and that Ray has too few GPUs"
		d.Explanation = "\"Started a local Ray instance\" is ray.init() finding no cluster to join: RAY_ADDRESS was not set and no `ray start` session file was at /tmp/ray/ray_current_cluster in this container (`ray start --temp-dir=…` writes it elsewhere, where ray.init() does not look). " +
			"The new Ray has only this machine's GPUs, so the placement group for the other nodes' GPUs cannot be satisfied."
		d.Fix = "R" + join[1:]
		return d, true
	}
	d.Title = "the Ray that vLLM started for itself" + onHost(host) + " has fewer GPUs than it needs"
	d.Explanation = "\"Started a local Ray instance\" is ray.init() finding no running cluster to join (RAY_ADDRESS unset, and no `ray start` session file at /tmp/ray/ray_current_cluster in this container — `ray start --temp-dir=…` writes it elsewhere), so it started a Ray with only this machine's visible GPUs; " +
		"then the placement group for tensor_parallel_size × pipeline_parallel_size GPUs could not be filled. The logs do not say whether a multi-node cluster was meant."
	d.Fix = "If a Ray cluster is running: " + join + "\nIf this is one machine: make tensor_parallel_size × pipeline_parallel_size at most the GPUs it shows (`nvidia-smi -L`; CUDA_VISIBLE_DEVICES limits them)."
	return d, true
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ---- the node vllm serve runs on has no GPU in Ray ------------------------------

var (
	// "current_node_resource={...}. ... current_ip='74.10.28.48'."
	curNodeResRE = regexp.MustCompile(`current_node_resource=\{([^}]*)\}`)
	curNodeIPRE  = regexp.MustCompile(`current_ip='([^']+)'`)
)

func matchDriverNoGPU(b string) bool {
	return containsAny(b, "Ray does not allocate any GPUs on the driver node", "Current node has no GPU available")
}

func buildDriverNoGPU(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	b := s.lines[i].body
	host := s.nodeOf(i)
	c := s.ctx
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}}
	compare := "`ray list nodes` on the head shows the address and GPUs Ray registered for each node"
	if !strings.Contains(b, "Current node has no GPU available") {
		// Older vLLM: no Ray worker of the placement group runs on the node
		// whose IP equals the driver's get_ip().
		d.Title = "vLLM found none of its Ray GPU workers on its own node" + onHost(host)
		d.Explanation = "vLLM (older releases) looks for one of its GPU workers on the node whose Ray address equals its own IP — VLLM_HOST_IP, else the default-route address — and found none: " +
			"either that IP is not the address Ray registered this node under, or Ray has no GPU on the node vllm serve runs on."
		d.Fix = "Compare: " + compare + "; VLLM_HOST_IP on this node must be the same address (ray start --node-ip-address=<it> and VLLM_HOST_IP=<it>), and vllm serve must run on a node whose Ray has GPUs (the container started with --gpus)."
		return d, true
	}
	res := ""
	if m := curNodeResRE.FindStringSubmatch(b); m != nil {
		res = m[1]
	}
	ip := ""
	if m := curNodeIPRE.FindStringSubmatch(b); m != nil {
		ip = m[1]
	}
	where := orDefault(ip, "this node")
	if o := c.ownerOf(ip); o.node != "" {
		where = o.node + " (" + ip + ")"
	}
	switch {
	case strings.Contains(res, "bundle_group_"):
		d.Title = "the GPUs of " + where + " are all held by a Ray placement group; vLLM found none free"
		d.Explanation = "vLLM needs a free GPU on the node it runs on. Ray lists this node's available resources with placement-group bundles (bundle_group_…) and no GPU: another placement group reserved them — " +
			"another vLLM instance on this cluster, or one an earlier run left behind."
		d.Fix = "See who holds them: `ray list placement-groups` (and `ray status`) on the head. Stop the other serve, or remove a stale group (restarting Ray on the cluster clears them all); then start vllm serve again."
	default:
		d.Title = "Ray has no GPU on " + where + ", where vllm serve runs"
		d.Explanation = "vLLM needs a GPU in Ray on the node it runs on; Ray's available resources there name none: the node joined Ray without GPUs (its container started without --gpus, or ray start --num-gpus=0), or other work holds them."
		d.Fix = "Run vllm serve on a node whose Ray has GPUs (" + compare + "): start that node's container with --gpus all (rayform does) and ray start without --num-gpus=0."
	}
	return d, true
}
