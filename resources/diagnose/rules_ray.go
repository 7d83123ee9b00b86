package diagnose

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// This file holds the rules of the Ray domain: joining the cluster (GCS),
// Ray's view of nodes and GPUs, placement groups.

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
	live := gcsUnretried(s, hits)
	if len(live) == 0 {
		return Diagnosis{}, false
	}
	i, ev := gcsEvidence(s, live)
	worker := s.nodeOf(i)
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
	why := gcsAddressWhy(s.ctx, addr, host, port)
	why = append(why, gcsLocalIPWhy(s.ctx, gcsLocalIP(s, i))...)
	if len(why) == 0 {
		why = append(why, "The worker could not open a connection to the head's GCS within Ray's timeout.")
	}
	d.Explanation = strings.Join(why, "\n")
	d.Fix = gcsFix(s.ctx, worker, addr, host, port)
	return d, true
}

// gcsUnretried is the hits of a log with no "Ray runtime started" after
// them: a connection retried until Ray started is not a failure.
func gcsUnretried(s *scan, hits []int) []int {
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
	return live
}

// gcsEvidence picks the primary line among live, the first that names the
// GCS address (else the first), and adds one other line of its log that
// does not.
func gcsEvidence(s *scan, live []int) (int, []Evidence) {
	i := live[0]
	for _, j := range live {
		if gcsAddrRE.MatchString(s.lines[j].body) {
			i = j
			break
		}
	}
	ev := []Evidence{s.evidence(i)}
	for _, j := range live {
		if j != i && s.lines[j].log == s.lines[i].log && !gcsAddrRE.MatchString(s.lines[j].body) {
			ev = append(ev, s.evidence(j))
			break
		}
	}
	return i, ev
}

// gcsLocalIP is the address the worker chose for itself ("Local node IP")
// in line i's log, or "".
func gcsLocalIP(s *scan, i int) string {
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		if m := localNodeRE.FindStringSubmatch(s.lines[j].body); m != nil {
			return m[1]
		}
	}
	return ""
}

// gcsAddressWhy explains the GCS address the worker was given against
// the topology: empty, loopback, outside the fabric, or inside it and not
// answering.
func gcsAddressWhy(c Context, addr, host, port string) []string {
	in, known := c.inFabric(host)
	switch {
	case addr != "" && host == "":
		return []string{"The address has no host part: the head address was empty when `ray start --address` ran (an unset variable)."}
	case strings.HasPrefix(host, "127.") || host == "localhost":
		return []string{host + " is the worker's own loopback: the head address was not passed to the worker."}
	case known && !in:
		o := c.ownerOf(host)
		what := host + " is outside the fabric " + c.FabricCIDR.String()
		if o.node != "" {
			what += "; it is " + o.describe()
		}
		return []string{what + ". The worker was pointed at an address it cannot route to; on this topology nodes reach each other only over the fabric."}
	case known && in:
		return []string{host + " is inside the fabric " + c.FabricCIDR.String() + ", so the route is right but nothing answered on port " + port +
			": the head's GCS is not running (read the head's ray log), a firewall drops the port on the fabric, or the worker's Ray version differs from the head's."}
	}
	return nil
}

// gcsLocalIPWhy explains the worker's own address, when its log gives it.
func gcsLocalIPWhy(c Context, localIP string) []string {
	if localIP == "" {
		return nil
	}
	if lin, lknown := c.inFabric(localIP); lknown && !lin {
		return []string{"The worker itself chose " + localIP + " (\"Local node IP\"), outside the fabric: it was started without --node-ip-address."}
	}
	return []string{"The worker chose " + localIP + " as its own address (\"Local node IP\")."}
}

// gcsFix is what to check on the head when the address was right, else
// the worker's ray start with the head's fabric address.
func gcsFix(c Context, worker, addr, host, port string) string {
	if in, known := c.inFabric(host); known && in {
		return "Check the head first: is its Ray container running and listening on " + addr + " (`ss -ltn` on the head)? Allow TCP from " + c.FabricCIDR.String() +
			" in the head's firewall, and use the same image (the same Ray version) on every node."
	}
	gcsPort := strconv.Itoa(c.rayPort())
	if c.RayPort == 0 && port != "" {
		gcsPort = port // no configuration: the port the worker was given
	}
	fix := "Start the worker with the head's fabric address: ray start --address=" + orDefault(c.NodeAddrs[c.HeadNode], "<head fabric IP>") + ":" + gcsPort
	if wip := c.NodeAddrs[worker]; wip != "" {
		fix += " --node-ip-address=" + wip
	}
	return fix + " (rayform derives both from network = " + orDefault(c.Network, "network.<fabric>") + " on " + c.cluster() + ")."
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

// ---- a Ray port other than the GCS port is unreachable -------------------------

// RayPortUnreachable: a Ray process could not connect to one of Ray's ports
// on another node other than the GCS port (a raylet's node manager or
// object manager, a worker, a Redis shard of Ray < 2): the node joined
// through the GCS port, and a firewall drops the rest.
const RayPortUnreachable Cause = "ray-port-unreachable"

var (
	// gRPC's connect failure as Ray's processes log a failed RPC to another
	// one (grpc src/core/lib/iomgr/tcp_client_posix.cc, the catalogue's
	// ray-port-unreachable template; other gRPC releases print another
	// status word, older ones no address): "failed to connect to all
	// addresses; last error: UNKNOWN: ipv4:10.0.0.2:8076: Failed to connect
	// to remote host: Connection refused".
	rayGRPCConnRE = regexp.MustCompile(`failed to connect to all addresses(?:; last error: [A-Z_]+: (?:ipv4|ipv6):(\[[^\]]+\]|[0-9.]+):(\d+): (?:Failed to connect to remote host: )?([^;]*))?`)
	// Ray < 2's raylet connecting to a Redis shard on the head
	// (src/ray/gcs/redis_context.cc, RAY_LOG(FATAL)): "Could not establish
	// connection to redis 10.0.0.1:12662 (context.err = 1)".
	rayRedisConnRE = regexp.MustCompile(`Could not establish connection to [Rr]edis (\[[^\]]+\]|[^\s:]+):(\d+)`)
	// Lines about the process's own node's raylet: not a connection
	// between nodes (core_worker_process.cc "Failed to get the system
	// config from raylet because it is dead").
	rayLocalRayletRE = regexp.MustCompile(`from [Rr]aylet because it is dead|system config from [Rr]aylet|[Rr]aylet (?:is terminated|has died|died)|Local [Rr]aylet died`)
)

// rayNodeDeadRE is the GCS giving up on a raylet it health-checks on the
// raylet's node manager port (gcs_node_manager.cc: "The node with node id:
// %s and address: %s and node name: %s has been marked dead because the
// detector has missed too many heartbeats from it", the raylet's own
// "mistakenly been marked as dead by the GCS: GCS failed to check the health
// of this node").
var rayNodeDeadRE = regexp.MustCompile(`node with node id:? \w+(?: and address: (\S+))?.* has been marked dead because the (?:detector|monitor) has missed too many heartbeats|mistakenly been marked as dead by the GCS`)

func matchRayPort(b string) bool {
	if strings.Contains(b, "marked dead") || strings.Contains(b, "marked as dead") {
		return rayNodeDeadRE.MatchString(b)
	}
	return containsAny(b, "failed to connect to all addresses", "Could not establish connection to redis", "Could not establish connection to Redis") &&
		!rayLocalRayletRE.MatchString(b) && !strings.Contains(b, "GCS")
}

// rayMemoryKillRE are the lines of a node that died of memory, not of the
// network: Ray's memory monitor, the kernel's OOM killer.
var rayMemoryKillRE = regexp.MustCompile(`killed due to memory pressure|running low on memory|NODE_OUT_OF_MEMORY|OOM[- ]?[Kk]ill|Out of memory: Killed process`)

// rayNodeDead explains a node the GCS marked dead: with no sign of memory
// or a crash in the logs, the GCS could not reach the raylet's ports.
func (s *scan) rayNodeDead(i int) (Diagnosis, bool) {
	for j := range s.lines {
		if rayMemoryKillRE.MatchString(s.lines[j].text) {
			return Diagnosis{}, false // the memory rules say why it died
		}
	}
	addr := ""
	if m := rayNodeDeadRE.FindStringSubmatch(s.lines[i].body); m != nil {
		addr = m[1]
	}
	c := s.ctx
	node := orDefault(c.ownerOf(addr).node, addr)
	from := "the head"
	if c.FabricCIDR.IsValid() {
		from = c.FabricCIDR.String()
	}
	return Diagnosis{
		Title:    "the head's GCS lost the raylet of node " + orDefault(node, "<the worker>") + ": its health checks of that node's Ray port got no answer",
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "The GCS health-checks every raylet by connecting to the raylet's node manager port on its node, and marks the node dead when the checks fail several times in a row. " +
			"A node marked dead shortly after it joined was never reachable from the head on that port: the node registered through the GCS port, but its firewall drops the head's connections to its other Ray ports (random unless ray start pins them). " +
			"The logs show no memory kill; later in a run the same line also follows a raylet that crashed or was overloaded (its raylet.out says).",
		Fix: "On " + orDefault(node, "the worker node") + ": allow TCP from " + from + " to Ray's ports (e.g. `sudo ufw allow from <head IP>`), or pin them on every node — ray start ... --node-manager-port=6380 --object-manager-port=6381 --min-worker-port=10002 --max-worker-port=10100 — and open those between the nodes; then restart Ray on that node. " +
			"If the node had run for a while, read its raylet.out for a crash first.",
	}, true
}

// redisShard is rayPortTarget's reason for Ray < 2's Redis connection.
const redisShard = "a Redis shard of the head (Ray < 2)"

// rayPortTarget parses the address, port and reason a matching line names.
func rayPortTarget(b string) (ip, port, reason string) {
	if m := rayRedisConnRE.FindStringSubmatch(b); m != nil {
		return strings.Trim(m[1], "[]"), m[2], redisShard
	}
	if m := rayGRPCConnRE.FindStringSubmatch(b); m != nil {
		return strings.Trim(m[1], "[]"), m[2], strings.TrimSpace(m[3])
	}
	return "", "", ""
}

func buildRayPort(s *scan, hits []int) (Diagnosis, bool) {
	gcsPort := strconv.Itoa(s.ctx.rayPort())
	gcsName := "the GCS port " + gcsPort
	if s.ctx.RayPort == 0 {
		gcsName = "the GCS port (" + gcsPort + " unless ray start --port says otherwise)"
	}
	h := sortRayPortHits(s, hits, gcsPort)
	switch {
	case h.i < 0 && h.gcs >= 0:
		return s.rayGCSRPC(h.gcs), true
	case h.i < 0 && h.dead >= 0:
		return s.rayNodeDead(h.dead)
	case h.i < 0:
		return Diagnosis{}, false
	}
	host := s.nodeOf(h.i)
	target := "another node's Ray process"
	if h.ip != "" {
		target = h.ip + ":" + h.port
		if o := s.ctx.ownerOf(h.ip); o.node != "" {
			target += " (" + o.describe() + ")"
		}
	}
	d := Diagnosis{Evidence: []Evidence{s.evidence(h.i)}}
	if h.ip != "" {
		d.Title = "Ray" + onHost(host) + " cannot connect to port " + h.port + " on " + h.ip + ", a port of Ray's other than " + gcsName
	} else {
		d.Title = "Ray" + onHost(host) + " cannot connect to " + target + " (gRPC: failed to connect to all addresses)"
	}
	d.Explanation = rayPortWhy(s.ctx, h, gcsName, host, target)
	d.Fix = rayPortFix(s.ctx, h, gcsPort)
	return d, true
}

// rayPortHits is the hits of the Ray-port rule sorted: the first connect
// failure to a port other than the GCS's (preferring one that names its
// address: i, with its ip, port and reason), the first to the GCS port
// (gcs), and the first node marked dead (dead); -1 for none.
type rayPortHits struct {
	i, gcs, dead     int
	ip, port, reason string
}

// sortRayPortHits sorts hits, a rule's matching lines, into rayPortHits.
func sortRayPortHits(s *scan, hits []int, gcsPort string) rayPortHits {
	h := rayPortHits{i: -1, gcs: -1, dead: -1}
	for _, j := range hits {
		if rayNodeDeadRE.MatchString(s.lines[j].body) {
			if h.dead < 0 {
				h.dead = j
			}
			continue
		}
		a, p, r := rayPortTarget(s.lines[j].body)
		if p == gcsPort {
			if h.gcs < 0 {
				h.gcs = j
			}
			continue
		}
		if h.i < 0 || h.ip == "" && a != "" {
			h.i, h.ip, h.port, h.reason = j, a, p, r
		}
		if h.ip != "" {
			break
		}
	}
	return h
}

// rayPortWhy explains Ray's ports beyond the GCS's, and what the failure's
// reason says of the port it names.
func rayPortWhy(c Context, h rayPortHits, gcsName, host, target string) string {
	why := "A node joins the cluster through " + gcsName + " of the head; after that Ray's processes connect to each other directly, on ports that are random unless `ray start` pins them: " +
		"each node's raylet (--node-manager-port), its object manager (--object-manager-port), the workers (--min-worker-port..--max-worker-port, 10002-19999 by default)" +
		", and in Ray < 2 the head's Redis shards (--redis-shard-ports). A firewall that lets only the GCS port through admits the node and then drops these connections."
	switch r := strings.ToLower(h.reason); {
	case strings.Contains(r, "redis shard"):
		why += "\nPort " + h.port + " on " + h.ip + " is " + h.reason + ", not the GCS port the node joined through."
	case strings.Contains(r, "refused"):
		why += "\nThe connection to " + target + " was refused: nothing listened there — the process on that node exited (its raylet log says why) or the port is closed by a REJECT rule."
	case strings.Contains(r, "timed out"), strings.Contains(r, "no route"), strings.Contains(r, "unreachable"):
		why += "\nThe connection to " + target + " " + h.reason + ": the packets were dropped on the way — a firewall on " + orDefault(c.ownerOf(h.ip).node, h.ip) + " or between the nodes, or an address not routable from" + orDefault(onHost(host), " this node") + "."
	case h.ip == "":
		why += "\nThe log does not name the address; gRPC's \"failed to connect to all addresses\" is Ray's process failing to open a TCP connection to another node's Ray process."
	}
	return why
}

// rayPortFix opens the named port, then pins and opens all of Ray's ports
// between the nodes.
func rayPortFix(c Context, h rayPortHits, gcsPort string) string {
	from := "the other nodes"
	if c.FabricCIDR.IsValid() {
		from = c.FabricCIDR.String()
	}
	fix := ""
	if h.ip != "" {
		fix = "Open TCP port " + h.port + " on " + orDefault(c.ownerOf(h.ip).node, h.ip) + " to " + from + " (e.g. `sudo ufw allow from " + orDefault(strings.TrimPrefix(from, "the other nodes"), "<other node's IP>") + " to any port " + h.port + " proto tcp`, or firewall-cmd --add-port=" + h.port + "/tcp). "
	}
	return fix + "Ray's other ports change on every start, so open them all between the nodes: pin them on every node — ray start ... --node-manager-port=6380 --object-manager-port=6381 --min-worker-port=10002 --max-worker-port=10100 (Ray < 2 also --redis-shard-ports=6382) — " +
		"and allow those ports (with the GCS port " + gcsPort + ", the dashboard agent's and the metrics port) from " + from + " in each node's firewall, or allow all TCP between the nodes' addresses on the network they share."
}

// rayGCSRPC is a gRPC connect failure to the GCS port: the GCS is
// unreachable, said in gRPC's words rather than Ray's.
func (s *scan) rayGCSRPC(i int) Diagnosis {
	ip, port, reason := rayPortTarget(s.lines[i].body)
	if reason == redisShard {
		reason = "" // the GCS's Redis of Ray < 2
	}
	host := s.nodeOf(i)
	return Diagnosis{
		Cause:    GCSUnreachable,
		Title:    "Ray" + onHost(host) + " cannot reach the GCS at " + ip + ":" + port + ifNotEmpty(" ("+reason+")", reason),
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "Port " + port + " is the GCS port: every Ray process of a node talks to the head's GCS there, and the connection failed" + ifNotEmpty(" ("+reason+")", reason) +
			": the head's GCS is not running (read the head's Ray log), the address is not the head's on a network this node reaches, or a firewall drops the port.",
		Fix: "Check the head first: is its Ray running and listening on " + ip + ":" + port + " (`ss -ltn` on the head)? Start the nodes with the head's address on the network they share (ray start --address=<head IP>:" + port + " --node-ip-address=<this node's IP>), and allow TCP to port " + port + " (and Ray's other ports) between the nodes.",
	}
}

// ---- a process's node IP matches no raylet --------------------------------------

// RayNodeIPMismatch: a Ray process (a driver such as vllm serve, a worker)
// looked for the raylet of its node under the node's IP and found none:
// the node's Ray was started under another address, or the process runs on
// a machine (or in a container) that is no node of the cluster.
const RayNodeIPMismatch Cause = "ray-node-ip-mismatch"

// rayNoRayletRE is Ray's global_state_accessor.cc: "This node has an IP
// address of %s, while we can not find the matched Raylet address. This
// maybe come from when you connect the Ray cluster with a different IP
// address or connect a container." (older releases: "can not found").
var rayNoRayletRE = regexp.MustCompile(`This node has an IP address of (\S+?),? while we can not f(?:ind|ound) the matched Raylet address`)

func matchNoRaylet(b string) bool {
	return strings.Contains(b, "matched Raylet address") && rayNoRayletRE.MatchString(b)
}

func buildNoRaylet(s *scan, hits []int) (Diagnosis, bool) {
	// Ray logs the line at INFO and goes on when the driver finds its
	// raylet after all: it names the cause only when a process then failed.
	i := hits[0]
	if _, failed := s.fatalError(); !failed && !s.lastWords(i) {
		return Diagnosis{}, false
	}
	ip := rayNoRayletRE.FindStringSubmatch(s.lines[i].body)[1]
	host := s.nodeOf(i)
	c := s.ctx
	who := ip
	if o := c.ownerOf(ip); o.node != "" {
		who = ip + " (" + o.describe() + ")"
	}
	ev := []Evidence{s.evidence(i)}
	if f, ok := s.fatalError(); ok && f.i != i {
		ev = append(ev, s.evidence(f.i))
	}
	return Diagnosis{
		Title:    "the Ray process" + onHost(host) + " found no raylet registered under its node's IP " + who,
		Evidence: ev,
		Explanation: "A Ray driver or worker finds the raylet of its own node by the node's IP in the GCS's node table. No node is registered under " + ip +
			": this node's Ray was started under another of its addresses (ray start picks the default-route address unless --node-ip-address is given; a VPN, a second NIC or a container bridge gives the machine several), or the process runs where no `ray start` ran — another machine, or a container other than the node's Ray container. " +
			"The process then cannot reach a raylet and fails (the error after this line).",
		Fix: "Make the two addresses one: start Ray on this node with --node-ip-address=" + ip + " (or start the process with the address Ray registered: `ray list nodes` on the head shows it; vLLM takes VLLM_HOST_IP), " +
			"and run the driver inside the node's Ray container (rayform does: docker exec into it). From a machine outside the cluster, connect with Ray Client (ray.init(\"ray://<head>:10001\")) instead of joining.",
	}, true
}
