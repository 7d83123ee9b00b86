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

// ncclNoFamilyRE is NCCL 2.2-2.4's include/socket.h creating a socket
// for an address it never found (WARN("Socket creation failed : %s"),
// EAFNOSUPPORT): "NCCL displays that second WARN when it finds no usable IP
// interface" (NCCL's maintainer, NVIDIA/nccl-tests#14).
var ncclNoFamilyRE = regexp.MustCompile(`Socket creation failed ?: Address family not supported`)

func matchNCCL(b string) bool {
	return containsAny(b, "no socket interface found", "is neither AF_INET(2) nor AF_INET6(10)") || ncclNoFamilyRE.MatchString(b)
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
		d.Explanation = "NCCL's bootstrap needs an interface matching NCCL_SOCKET_IFNAME (default ^lo,docker); none matched in the container's network namespace. NCCL ≤ 2.27.7 fails silently here and later reports an address of an unknown family; NCCL 2.2-2.4 says \"Socket creation failed : Address family not supported\". " +
			"A container started without --network host sees only its own interfaces (none usable with --network none)."
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
	f := c10dFailure{ip: ip, port: port, from: s.nodeOf(i)}
	errEv := f.readErrno(s, i)
	d := Diagnosis{Evidence: append([]Evidence{s.evidence(i)}, errEv...)}
	if ip == "" {
		return f.withoutMaster(d, s.ctx, b), true
	}
	d.Title = "vLLM's c10d master " + ip + ":" + port + " is unreachable"
	if f.from != "" {
		d.Title += " from " + f.from
	}
	c := s.ctx
	switch in, known := c.inFabric(ip); {
	case ip == "0.0.0.0" || strings.HasPrefix(ip, "127."):
		d.Explanation = ip + " is not a routable address: vLLM's get_ip() found no usable address and fell back. Set VLLM_HOST_IP on every node."
	case known && !in:
		d.Explanation, d.Fix = f.outsideFabric(c), c.bindingFix(ip)
	case known && in:
		d.Explanation, d.Fix, d.consequence = f.insideFabric(c)
	default:
		d.Explanation = orDefault(f.from, "The worker") + " could not open a TCP connection to " + ip + ":" + port + f.errWhy() + ". Declare the fabric network so rayform can tell whether this is the wrong address."
		d.Fix = c.bindingFix(ip)
	}
	return d, true
}

// c10dFailure is a worker's failed connection to the c10d master: the
// master's ip and port (none when the log does not name them), the node
// it failed from, and the errno of c10d's own error line.
type c10dFailure struct {
	ip, port, from string
	errno, errText string
}

// readErrno reads the errno of the first c10d error line of line i's log;
// that line is evidence too when it is not line i.
func (f *c10dFailure) readErrno(s *scan, i int) []Evidence {
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		if m := c10dErrnoRE.FindStringSubmatch(s.lines[j].body); m != nil && strings.Contains(s.lines[j].body, "[c10d]") {
			f.errno, f.errText = m[1], strings.TrimSpace(m[2])
			if j != i {
				return []Evidence{s.evidence(j)}
			}
			return nil
		}
	}
	return nil
}

// errWhy is the errno in words, for an explanation, or "".
func (f c10dFailure) errWhy() string {
	if f.errno == "" {
		return ""
	}
	return " (errno " + f.errno + ": " + f.errText + ")"
}

// withoutMaster completes d when the log names no master address: the
// master timed out waiting for its clients (line b), or a client failed.
func (f c10dFailure) withoutMaster(d Diagnosis, c Context, b string) Diagnosis {
	if m := c10dClientsRE.FindStringSubmatch(b); m != nil {
		d.Title = "the c10d master" + onHost(f.from) + " timed out waiting for workers (" + m[1] + "/" + m[2] + " clients joined)"
		d.Explanation = "The TCPStore master listened, but the other ranks never connected: they were given an address they cannot reach, or never started. Their own logs show the address they tried."
	} else {
		d.Title = "a torch.distributed client" + onHost(f.from) + " cannot reach the c10d master"
		d.Explanation = "The TCPStore rendezvous failed; the log does not show the master address."
	}
	d.Fix = c.bindingFix("")
	return d
}

// outsideFabric explains a master address outside the fabric: where vLLM
// took it from, and why the worker cannot reach it.
func (f c10dFailure) outsideFabric(c Context) string {
	w := f.ip + " is outside the fabric " + c.FabricCIDR.String()
	if o := c.ownerOf(f.ip); o.node != "" {
		w += ": it is " + o.describe()
	}
	return w + ". vLLM takes the c10d master address from the head's Ray node IP (RayExecutorV2) or from VLLM_HOST_IP / the default-route address (classic executor). " +
		"Neither was bound to the fabric, so Ray registered the head under its management address, which " + orDefault(f.from, "the worker") + " cannot reach" + f.errWhy() + "."
}

// insideFabric explains a master address inside the fabric, by errno:
// nothing listening (a consequence of the master's exit), no route, or a
// filtered port; and the fix on the fabric path.
func (f c10dFailure) insideFabric(c Context) (why, fix string, consequence bool) {
	o := c.ownerOf(f.ip)
	w := f.ip + " is inside the fabric " + c.FabricCIDR.String()
	if o.node != "" {
		w += " (" + o.describe() + ")"
	}
	w += ", so the binding is right but the connection failed" + f.errWhy() + ": "
	switch f.errno {
	case "111":
		w += "nothing listens on port " + f.port + " — the master process had already exited (read the head's log above this line)."
		consequence = true
	case "101", "113":
		w += "no route — the fabric interface is down or has no address on one side."
	default:
		w += "the port is filtered (a firewall on the fabric; c10d uses a random port per run, so allow TCP from " + c.FabricCIDR.String() + "), or the master process exited."
	}
	fix = "Check the fabric path from " + orDefault(f.from, "the worker") + ": ping " + f.ip + "; allow TCP from " + c.FabricCIDR.String() + " on " + orDefault(o.node, "the head") +
		"'s firewall (c10d ports are random); if the head's vLLM exited first, its log shows why."
	return w, fix, consequence
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

// ---- NCCL's transports: the WARN (or "Last error:") line that names the failed call ----

// The classes of NCCL's transports (the catalogue's ids). One rule, NCCLNet,
// reads NCCL's own lines and names the class of the line that failed first,
// with what the lines around it say about that node: its host, the peer,
// the interface or GID NCCL used, the errno.
const (
	NCCLSocket Cause = "nccl-socket"
	NCCLIB     Cause = "nccl-ib"
	NCCLShm    Cause = "nccl-shm"
	// NCCLNet is the family rule's own name; it reports one of the above.
	NCCLNet Cause = "nccl-net"
)

// The message shapes of NCCL releases the catalogue (one release's
// sources) does not hold; each names its source.
var (
	// misc/socket.cc: "Connect to %s failed : %s" (2.4-2.17, also "Net :
	// Connect to ..."), "socketStartConnect: Connect to %s failed : %s"
	// (2.18+), "socketPollConnect: Connect to %s returned %d(%s) errno
	// %d(%s)" (2.19+); the address is "ip<port>".
	ncclConnectRE = regexp.MustCompile(`Connect to (\S+?)<(\d+)> (?:failed : (.+)|returned \d+\(([^)]*)\))`)
	// include/socket.h (2.2-2.4): "Call to connect failed : %s", "Call to
	// connect timeout : %s".
	ncclCallConnectRE = regexp.MustCompile(`Call to connect (?:failed|timeout) : (.+)`)
	// misc/socket.cc "socketProgress: Connection closed by remote peer %s"
	// (the catalogue's) and include/socket.h's "Connection closed by remote
	// peer" (2.2-2.4).
	ncclClosedRE = regexp.MustCompile(`Connection closed by remote peer(?: (\S+?)<(\d+)>)?`)
	// transport/net_ib.cc: "NET/IB : Got completion with error %d, opcode
	// %d, len %d, vendor err %d" (2.4-2.11), "... from peer %s with error
	// %d, ..." (2.12-2.18), "... from peer %s with status=%d opcode=%d
	// len=%d vendor err %d (%s)" (2.19+, the catalogue's).
	ncclIBCompletionRE = regexp.MustCompile(`NET/IBP? ?: ?Got completion (?:from peer (\S+?)<(\d+)> )?with (?:error |status=)(\d+)`)
	ncclVendorErrRE    = regexp.MustCompile(`vendor err (\d+)`)
	ncclGidsRE         = regexp.MustCompile(`localGid ?(\S+) remoteGids? ?(\S+)`)
	ncclHCARE          = regexp.MustCompile(`\bhca (\S+)`)
	ncclGidIndexRE     = regexp.MustCompile(`NCCL_IB_GID_INDEX set by environment to (\d+)|\bGID (\d+) \(`)
	// include/shm.h (2.4-2.7): "Call to posix_fallocate failed : %s";
	// misc/shmutils.cc (2.19+): "Error: failed to extend %s to %ld bytes,
	// error: %s"; the segment lines of every release name the size.
	ncclShmOldRE  = regexp.MustCompile(`Call to posix_fallocate failed ?: (.+)|failed to extend (/dev/shm/\S+) to (\d+) bytes, error: (.+)`)
	ncclShmSegRE  = regexp.MustCompile(`shared memory segment (\S+) \(size (\d+)\)(?:, error: ([^(]+))?`)
	ncclIfaceUsed = regexp.MustCompile(`(?:NET/Socket|Bootstrap) : Using (?:\[\d+\])?([\w.\-]+):([0-9A-Fa-f.:%\w]+)<\d+>|NET : Using interface ([\w.\-]+):([0-9A-Fa-f.:%\w]+)<\d+>`)
	ncclIfnameRE  = regexp.MustCompile(`NCCL_SOCKET_IFNAME set (?:by environment )?to (\S+)`)
)

// ncclNetRank orders the transport failures of one log: the one that
// broke first and breaks the others (a shared memory or IB failure closes
// the peers' sockets) before a connection the peer closed.
func ncclNetLine(b string) (Cause, int) {
	switch {
	case ncclShmOldRE.MatchString(b):
		return NCCLShm, 3
	case ncclIBCompletionRE.MatchString(b):
		return NCCLIB, 3
	case ncclConnectRE.MatchString(b), ncclCallConnectRE.MatchString(b):
		return NCCLSocket, 2
	case ncclClosedRE.MatchString(b):
		return NCCLSocket, 1
	}
	if strings.Contains(b, "no interface found") || strings.Contains(b, "No usable listening interface") {
		return "", 0 // an interface, not a transport: the catalogue's own line
	}
	if e, _, ok := signatureOf(b); ok {
		switch Cause(e.Class) {
		case NCCLShm, NCCLIB:
			return Cause(e.Class), 3
		case NCCLSocket:
			return NCCLSocket, 1
		}
	}
	return "", 0
}

func matchNCCLNet(b string) bool {
	if !containsAny(b, "onnect", "NET/IB", "shared memory", "posix_fallocate", "/dev/shm", "socket", "Socket", "ibv_") {
		return false
	}
	c, _ := ncclNetLine(b)
	return c != ""
}

func buildNCCLNet(s *scan, hits []int) (Diagnosis, bool) {
	best, bestRank := -1, 0
	var cause Cause
	for _, j := range hits {
		if s.healthyAfter(j) {
			continue // a WARN its process went past
		}
		if c, r := ncclNetLine(s.lines[j].body); r > bestRank {
			best, bestRank, cause = j, r, c
		}
	}
	if best < 0 {
		return Diagnosis{}, false
	}
	var d Diagnosis
	switch cause {
	case NCCLShm:
		d = s.ncclShm(best)
	case NCCLIB:
		d = s.ncclIB(best)
	default:
		d = s.ncclSocket(best)
	}
	d.Cause = cause
	return d, true
}

// ncclRankEnv is how to set an NCCL variable on every rank.
func (s *scan) ncclRankEnv() string {
	return "in the environment of every rank — on each node's container (rayform: env on " + s.ctx.cluster() + "; by hand: -e on each docker run, before ray start), not only in the shell of vllm serve"
}

// ncclSocket explains a socket transport failure: which node could not
// reach which peer, and what NCCL was bound to there.
func (s *scan) ncclSocket(i int) Diagnosis {
	f := parseNCCLSocketFailure(s.lines[i].body)
	host := s.nodeOf(i)
	ch, more := s.ncclSocketChoice(i, host)
	target := "its peer"
	if f.peer != "" {
		target = f.peer + " (port " + f.port + ")"
		if o := s.ctx.ownerOf(f.peer); o.node != "" {
			target = o.node + " " + target
		}
	}
	d := Diagnosis{Evidence: append([]Evidence{s.evidence(i)}, more...)}
	title, why := f.explain(host, target)
	d.Title = title
	if ch.iface != "" {
		why = append(why, ch.explain(host))
	}
	d.Explanation = strings.Join(why, "\n")
	d.Fix = s.ncclSocketFix(f, host)
	return d
}

// ncclSocketFailure is what NCCL's socket error line says: the peer and
// port it names, the reason, and whether the peer closed the connection.
type ncclSocketFailure struct {
	peer, port, reason string
	closed             bool
}

// parseNCCLSocketFailure reads NCCL's socket error line b.
func parseNCCLSocketFailure(b string) ncclSocketFailure {
	var f ncclSocketFailure
	if m := ncclConnectRE.FindStringSubmatch(b); m != nil {
		f.peer, f.port, f.reason = m[1], m[2], strings.TrimSpace(m[3]+m[4])
	} else if m := ncclCallConnectRE.FindStringSubmatch(b); m != nil {
		f.reason = strings.TrimSpace(m[1])
	} else if m := ncclClosedRE.FindStringSubmatch(b); m != nil {
		f.peer, f.port, f.closed = m[1], m[2], true
	} else {
		f.closed = true
	}
	return f
}

// refused reports a connection refused by the peer's address.
func (f ncclSocketFailure) refused() bool {
	return strings.Contains(strings.ToLower(f.reason), "refused")
}

// explain is the title and the first explanation of the failure, by its
// class: closed by the peer, refused, or never completed.
func (f ncclSocketFailure) explain(host, target string) (string, []string) {
	switch {
	case f.closed:
		return "NCCL" + onHost(host) + " lost its connection to " + target + ": the peer closed it",
			[]string{"NCCL's socket to " + target + " was closed from the other end. A peer closes its sockets when its process ends: the peer rank failed first (its log names why — shared memory, InfiniBand, memory), or a middlebox reset the connection."}
	case f.refused():
		return "NCCL" + onHost(host) + " cannot connect to " + target + ": connection refused",
			[]string{"Nothing listened at " + orDefault(f.peer, "the peer's address") + " on NCCL's port: the peer rank had already exited (its log names why), or the peer advertised an address of an interface that is not the one the nodes share (a container bridge such as 172.17.0.1, another network), so the connection reached another machine."}
	}
	title := "NCCL" + onHost(host) + " cannot connect to " + target
	if f.reason != "" {
		title += " (" + f.reason + ")"
	}
	return title, []string{"The connection to " + target + " never completed (" + orDefault(f.reason, "no answer") + "): the packets are dropped on the way — a firewall on either node drops NCCL's ports (random, so a rule for fixed ports does not cover them), or the peer's address is on a network this node cannot route to."}
}

// ncclSocketIface is what NCCL chose on a node: the interface and address
// its line names, and NCCL_SOCKET_IFNAME when set.
type ncclSocketIface struct {
	iface, ifaceIP, ifname string
}

// ncclSocketChoice reads what NCCL chose on host from line i's log (its
// interface line, the variable); the interface line is evidence too when
// it is not line i.
func (s *scan) ncclSocketChoice(i int, host string) (ncclSocketIface, []Evidence) {
	var ch ncclSocketIface
	var ev []Evidence
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		lb := s.lines[j].body
		if host != "" && s.nodeOf(j) != "" && s.nodeOf(j) != host {
			continue
		}
		if m := ncclIfaceUsed.FindStringSubmatch(lb); m != nil && ch.iface == "" {
			ch.iface, ch.ifaceIP = m[1]+m[3], m[2]+m[4]
			if j != i {
				ev = append(ev, s.evidence(j))
			}
		}
		if m := ncclIfnameRE.FindStringSubmatch(lb); m != nil && ch.ifname == "" {
			ch.ifname = m[1]
		}
	}
	return ch, ev
}

// explain says which interface NCCL used on host, who chose it, and
// whether the other nodes can reach it.
func (ch ncclSocketIface) explain(host string) string {
	w := "NCCL" + onHost(host) + " uses " + ch.iface + " (" + ch.ifaceIP + ")"
	if ch.ifname != "" {
		w += ", chosen by NCCL_SOCKET_IFNAME=" + ch.ifname
	} else {
		w += ", its own choice (NCCL_SOCKET_IFNAME unset)"
	}
	if bad := badIface(ch.iface, ch.ifaceIP); bad != "" {
		return w + ": " + bad + ", which the other nodes cannot reach."
	}
	return w + "."
}

// ncclSocketFix binds NCCL to the shared network's interface on both
// ends, opens the path, and points at the peer's log when it went first.
func (s *scan) ncclSocketFix(f ncclSocketFailure, host string) string {
	c := s.ctx
	want := orDefault(c.FabricInterface, "<the interface of the network the nodes share>")
	on := orDefault(host, "this node")
	fix := "On " + on
	if f.peer != "" {
		fix += " and on " + orDefault(c.ownerOf(f.peer).node, f.peer)
	}
	fix += ": set NCCL_SOCKET_IFNAME=" + want + " (and GLOO_SOCKET_IFNAME, the same) " + s.ncclRankEnv() + "; `ip -br addr` on each node shows the name."
	if f.peer != "" {
		fix += " Check the path from " + on + ": `ping " + f.peer + "`, and allow TCP between the nodes' addresses on that network in both firewalls (NCCL's ports are random)."
	} else {
		fix += " Allow TCP between the nodes' addresses on that network in both firewalls (NCCL's ports are random)."
	}
	if f.closed || f.refused() {
		fix += " If the peer's process exited first, its log holds the cause: read it before changing the network."
	}
	return fix
}

// badIface says why an interface is not one the nodes share, or "".
func badIface(iface, ip string) string {
	switch {
	case iface == "lo" || strings.HasPrefix(ip, "127."):
		return "the loopback interface"
	case strings.HasPrefix(iface, "docker") || strings.HasPrefix(iface, "br-") || strings.HasPrefix(iface, "veth") || strings.HasPrefix(iface, "virbr") || strings.HasPrefix(iface, "cni") || strings.HasPrefix(iface, "flannel"):
		return "a container or VM bridge of this host"
	case strings.HasPrefix(strings.ToLower(ip), "fe80:"):
		return "an IPv6 link-local address"
	}
	return ""
}

// ncclIB explains an InfiniBand/RoCE completion error: the peer, the
// status, the GIDs and the GID index in use.
func (s *scan) ncclIB(i int) Diagnosis {
	b := s.lines[i].body
	host := s.nodeOf(i)
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}}
	peer, status := "", ""
	if m := ncclIBCompletionRE.FindStringSubmatch(b); m != nil {
		peer, status = m[1], m[3]
	}
	if peer == "" {
		if e, vals, ok := signatureOf(b); ok && len(vals) > 0 {
			for n, name := range e.Captures {
				if n < len(vals) && name == "v1" && strings.Contains(e.Template, "from peer {v1}") {
					peer = strings.SplitN(vals[n], "<", 2)[0]
				}
			}
		}
	}
	vendor := ""
	if m := ncclVendorErrRE.FindStringSubmatch(b); m != nil {
		vendor = m[1]
	}
	gidIdx := ""
	lo, hi := s.logSpan(i)
	for j := lo; j < hi && gidIdx == ""; j++ {
		if m := ncclGidIndexRE.FindStringSubmatch(s.lines[j].body); m != nil {
			gidIdx = m[1] + m[2]
		}
	}
	c := s.ctx
	target := "its peer"
	if peer != "" {
		target = orDefault(c.ownerOf(peer).node, peer)
	}
	switch {
	case status != "":
		d.Title = "NCCL's RDMA transport" + onHost(host) + " failed talking to " + target + " (completion status " + status + ifNotEmpty(", vendor err "+vendor, vendor) + ")"
	case strings.Contains(b, "GID table changed"):
		d.Title = "the RoCE GID table" + onHost(host) + " changed while NCCL used it"
	default:
		d.Title = "NCCL's InfiniBand/RoCE transport failed" + onHost(host)
	}
	var why []string
	if status == "12" {
		why = append(why, "Status 12 is IBV_WC_RETRY_EXC_ERR: the NIC retried until its counter ran out without an acknowledgement from "+target+" — a timeout. Right at the start it means the two NICs cannot reach each other over RDMA, although NCCL's TCP bootstrap worked: "+
			"on RoCE, the GID index selects which address (IPv4 or IPv6, RoCE v1 or v2) the NIC sends from, and the default (0, a link-local RoCE v1 GID) is not routed between the nodes.")
	} else {
		why = append(why, "NCCL's InfiniBand/RoCE transport reported the failure above; the NIC, the GID selected on RoCE, or the link between the nodes is at fault.")
	}
	if m := ncclGidsRE.FindStringSubmatch(b); m != nil {
		why = append(why, "The GIDs in use: local "+m[1]+", remote "+m[2]+gidKind(m[1])+".")
	}
	if gidIdx != "" {
		why = append(why, "NCCL used GID index "+gidIdx+" on this node; every node must use the index of the same kind of entry (RoCE v2 with the node's IPv4 address), which can differ between NICs.")
	} else {
		why = append(why, "The log shows no NCCL_IB_GID_INDEX: NCCL chose the GID itself.")
	}
	if m := ncclHCARE.FindStringSubmatch(b); m != nil {
		why = append(why, "The HCA: "+m[1]+".")
	}
	d.Explanation = strings.Join(why, "\n")
	on := orDefault(host, "each node")
	d.Fix = "On " + on + ifNotEmpty(" and on "+target, peer) + ": run `show_gids` (or `ibv_devinfo -v`) and take the index of the RoCE v2 entry that carries the node's IPv4 address on the fabric; set NCCL_IB_GID_INDEX=<that index> (and NCCL_IB_HCA=<the fabric's HCA> if the node has others) " + s.ncclRankEnv() +
		". Check RDMA between the two nodes with `ib_write_bw -d <hca> -x <gid index>`. NCCL_IB_DISABLE=1 falls back to TCP sockets (slower) while the fabric is fixed."
	return d
}

// gidKind describes a GID.
func gidKind(g string) string {
	switch l := strings.ToLower(g); {
	case strings.HasPrefix(l, "::ffff:"):
		return " (IPv4-mapped: a RoCE v2 IPv4 entry)"
	case strings.HasPrefix(l, "fe80:"):
		return " (link-local: not routed between subnets)"
	}
	return ""
}

// ncclShm explains a shared-memory segment failure: the size, the errno.
func (s *scan) ncclShm(i int) Diagnosis {
	b := s.lines[i].body
	host := s.nodeOf(i)
	ev := []Evidence{s.evidence(i)}
	seg, size, errText := "", "", ""
	if m := ncclShmOldRE.FindStringSubmatch(b); m != nil {
		errText = strings.TrimSpace(m[1] + m[4])
		seg, size = m[2], m[3]
	}
	lo, hi := s.logSpan(i)
	for j := i; j < hi && j <= i+8 && seg == ""; j++ {
		if m := ncclShmSegRE.FindStringSubmatch(s.lines[j].body); m != nil {
			seg, size = m[1], m[2]
			if errText == "" {
				errText = strings.TrimSpace(m[3])
			}
			if j != i {
				ev = append(ev, s.evidence(j))
			}
		}
	}
	_ = lo
	d := Diagnosis{Evidence: ev}
	d.Title = "NCCL" + onHost(host) + " could not create its shared memory segment" + ifNotEmpty(" "+seg, seg) + ifNotEmpty(" ("+mib(size)+")", size)
	attach := strings.Contains(b, "attaching") || strings.Contains(strings.ToLower(errText), "no such file")
	switch {
	case attach:
		d.Title = "NCCL" + onHost(host) + " could not attach to a peer's shared memory segment" + ifNotEmpty(" "+seg, seg)
		d.Explanation = "Ranks on one host exchange data through segments in /dev/shm; this rank looked for the segment its peer created and did not find it: the two ranks do not share /dev/shm — they run in different containers (each has its own /dev/shm unless started with --ipc=host)."
		d.Fix = "On " + orDefault(host, "this host") + ": start every container of the host with --ipc=host (rayform does for ray_cluster containers), so its ranks share /dev/shm. Or, slower, set NCCL_SHM_DISABLE=1 " + s.ncclRankEnv() + "."
		return d
	case strings.Contains(strings.ToLower(errText), "no space"):
		d.Explanation = "NCCL needs " + orDefault(mib(size), "a segment") + " per peer connection in /dev/shm, and /dev/shm was full: Docker gives a container 64 MB of /dev/shm unless told otherwise, and segments of earlier runs that died stay there."
	default:
		d.Explanation = "NCCL could not create its segment in /dev/shm" + ifNotEmpty(" ("+errText+")", errText) + ": /dev/shm is too small, full, or not writable in this container."
	}
	d.Fix = "On " + orDefault(host, "this host") + ": check `df -h /dev/shm` inside the container; start it with --ipc=host or a larger --shm-size (16g or more; rayform: shm_size on " + s.ctx.cluster() + "); remove stale /dev/shm/nccl-* files of dead runs. Or, at some speed, avoid /dev/shm: set NCCL_SHM_DISABLE=1 " + s.ncclRankEnv() + "."
	return d
}

// mib formats a byte count in MiB.
func mib(bytes string) string {
	n, err := strconv.ParseFloat(bytes, 64)
	if err != nil || n <= 0 {
		return ""
	}
	return strconv.FormatFloat(n/(1<<20), 'f', 1, 64) + " MiB"
}
