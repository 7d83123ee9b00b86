package diagnose

import (
	"regexp"
	"strconv"
	"strings"
)

// This file holds the rules of the distributed domain: torch.distributed's
// c10d store, NCCL and Gloo (interfaces, peers, system errors).

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
	if s.signatureIn("distributed") {
		// NCCL's own WARN or "Last error:" line says which call failed: the
		// catalogue's class names it.
		return Diagnosis{}, false
	}
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
