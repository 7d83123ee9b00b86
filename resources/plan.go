package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/dataplane"
)

// PlanInput is everything a plan is computed from. Planning does no I/O.
type PlanInput struct {
	// Config is evaluated with the observed facts (config.WithFacts).
	Config  *config.Config
	Facts   *observe.Facts
	State   *state.State // nil means empty
	Project string
	// RefreshOnly reports drift and plans no action.
	RefreshOnly bool
	// Replace holds the addresses of resources to replace even though
	// they match the configuration (apply -replace=ADDRESS): a ray_cluster
	// recreates every container, a vllm_serve restarts its process.
	Replace map[string]bool
}

// Result is a plan plus the work apply needs to carry it out.
type Result struct {
	Plan *plan.Plan
	// Work is keyed by resource address; resources with nothing to do are
	// absent.
	Work map[string]*Work
	// Addrs are the nodes' observed fabric addresses.
	Addrs map[string]netip.Addr
}

// Work is what apply must do for one resource.
type Work struct {
	Address string
	Type    string // "ray_cluster" or "vllm_serve"
	Action  plan.Action
	Cluster *ClusterWork
	Serve   *ServeWork
	// Hosts are the nodes the resource lives on (for the state file).
	Hosts []string
}

// ClusterWork is the work of a ray_cluster.
type ClusterWork struct {
	Name string
	// Specs are the desired containers, head first.
	Specs []ContainerSpec
	// Start lists the nodes whose container must be (re)created.
	Start map[string]bool
	// Remove lists the managed containers to stop and remove first.
	Remove []Removal
	// HeadAddr is "ip:port" of the GCS.
	HeadAddr string
}

// Removal is one container rayform created that must go.
type Removal struct {
	Node, Container string
}

// ServeWork is the work of a vllm_serve.
type ServeWork struct {
	Spec ServeSpec
	// Stop is set when a serve process may be running and must be stopped
	// first.
	Stop bool
	// Start is false for a delete.
	Start        bool
	HeadIP       netip.Addr
	ReadyTimeout time.Duration
	// Check are the ranks of the data-plane check that runs before the
	// serve starts (CheckNodes); nil when it is off.
	Check []dataplane.Node
}

// memoryHeadroomLimit is the share of memory below Ray's kill threshold
// that vLLM must leave on unified memory, for the OS, Ray itself and CUDA
// graph capture: less than this is an error, not a warning.
const memoryHeadroomLimit = 0.10

// rayDefaultMemoryThreshold is Ray's RAY_memory_usage_threshold default.
const rayDefaultMemoryThreshold = 0.95

// Plan computes the plan. It is a pure function of its input.
func Plan(in PlanInput) *Result {
	p := &planner{in: in, cfg: in.Config, facts: in.Facts, res: &Result{Plan: &plan.Plan{RefreshOnly: in.RefreshOnly}, Work: map[string]*Work{}}}
	if p.facts == nil {
		p.facts = &observe.Facts{Hosts: map[string]*observe.HostFacts{}}
	}
	p.addrs, p.ifaces = FabricAddrs(p.cfg, p.facts)
	p.res.Addrs = p.addrs
	p.nodes()
	p.networks()
	for _, rc := range sortedClusters(p.cfg) {
		p.cluster(rc)
	}
	for _, sv := range sortedServes(p.cfg) {
		p.serve(sv)
	}
	p.removed()
	p.outputs()
	if in.RefreshOnly {
		p.res.Work = map[string]*Work{}
	}
	p.res.Plan.SortChanges()
	return p.res
}

type planner struct {
	in     PlanInput
	cfg    *config.Config
	facts  *observe.Facts
	res    *Result
	addrs  map[string]netip.Addr
	ifaces map[string]string
	// clusterAction remembers each cluster's action for its serves.
	clusterAction map[string]plan.Action
}

func (p *planner) finding(sev plan.Severity, addr, host, summary, detail, fix string) {
	p.res.Plan.Findings = append(p.res.Plan.Findings, plan.Finding{Severity: sev, Address: addr, Host: host, Summary: summary, Detail: detail, Fix: fix})
}

func (p *planner) host(node string) *observe.HostFacts {
	hf := p.facts.Hosts[node]
	if hf == nil || hf.Err != "" && !hf.Complete {
		return nil
	}
	return hf
}

// nodes checks each node: reachable, docker usable, GPUs as declared.
func (p *planner) nodes() {
	inCluster := map[string]bool{}
	for _, rc := range p.cfg.RayClusters {
		for _, n := range rc.Nodes() {
			inCluster[n] = true
		}
	}
	for _, n := range sortedNodes(p.cfg) {
		addr := n.Addr
		if err, ok := p.facts.Errors[n.Name]; ok {
			p.res.Plan.Unreachable = append(p.res.Plan.Unreachable, n.Name)
			p.finding(plan.Error, addr, n.Name, fmt.Sprintf("cannot observe %s", n.Name), err.Error(),
				"check that `ssh "+sshTarget(n)+"` works from this machine (host key in known_hosts, key in the agent or identity_file)")
			continue
		}
		hf := p.host(n.Name)
		if hf == nil {
			continue
		}
		if inCluster[n.Name] && !hf.Docker.Available {
			p.finding(plan.Error, addr, n.Name, fmt.Sprintf("docker is not usable on %s", n.Name), hf.Docker.Err,
				"install Docker and let the SSH user run it (e.g. add it to the docker group)")
		}
		switch {
		case hf.GPUs.Err != "" && n.GPUs > 0:
			p.finding(plan.Warning, addr, n.Name, fmt.Sprintf("cannot verify the GPUs of %s", n.Name),
				"nvidia-smi: "+hf.GPUs.Err, "install the NVIDIA driver, or check that nvidia-smi runs for the SSH user")
		case hf.GPUs.Err == "" && len(hf.GPUs.List) != n.GPUs:
			names := []string{}
			for _, g := range hf.GPUs.List {
				names = append(names, g.Name)
			}
			p.finding(plan.Error, addr, n.Name,
				fmt.Sprintf("%s declares gpus = %d but nvidia-smi reports %d", n.Name, n.GPUs, len(hf.GPUs.List)),
				strings.Join(names, ", "), fmt.Sprintf("set gpus = %d, or fix the host's driver", len(hf.GPUs.List)))
		}
	}
}

func sshTarget(n *config.Node) string {
	t := n.Host
	if n.User != "" {
		t = n.User + "@" + t
	}
	if n.Port != 0 && n.Port != 22 {
		t += " -p " + strconv.Itoa(n.Port)
	}
	return t
}

// networks checks every node of every network: its fabric address exists
// inside the CIDR on the pinned interface, the link is up with the declared
// MTU, no two nodes share an address, and every node routes to every peer
// over the fabric interface.
func (p *planner) networks() {
	for _, nw := range sortedNetworks(p.cfg) {
		seen := map[netip.Addr]string{}
		for _, node := range nw.Nodes {
			hf := p.host(node)
			if hf == nil {
				continue
			}
			want := nw.InterfaceFor(node)
			if want != "" {
				link, ok := hf.Links.ByName(want)
				if !ok {
					var names []string
					for _, l := range hf.Links.List {
						names = append(names, l.Name)
					}
					p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("interface %s does not exist on %s", want, node),
						"The host has: "+strings.Join(names, ", ")+".",
						fmt.Sprintf("set the network's interface for %s to its fabric interface, e.g. interface = { %q = \"<name>\" }", node, node))
					continue
				}
				if !link.Up() {
					detail, fix := "operstate "+link.OperState, fmt.Sprintf("bring it up: sudo ip link set %s up (and check the cable)", want)
					if slices.Contains(link.Flags, "UP") {
						// Administratively up, no link: the kernel says
						// NO-CARRIER. Setting it up again changes nothing.
						detail = "operstate " + link.OperState + ", flags " + strings.Join(link.Flags, ",") + ": the interface is up but has no carrier"
						fix = fmt.Sprintf("no carrier on %s: check the cable and the switch port it is plugged into", want)
					}
					p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("fabric interface %s is down on %s", want, node), detail, fix)
				}
				if nw.MTU > 0 && link.MTU != nw.MTU {
					p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("MTU of %s on %s is %d, want %d", want, node, link.MTU, nw.MTU),
						"", fmt.Sprintf("sudo ip link set %s mtu %d (and make it persistent in the host's network config)", want, nw.MTU))
				}
			}
			addr, ok := p.addrs[node]
			if !ok {
				var on []string
				for _, a := range hf.Addresses.In(nw.CIDR) {
					on = append(on, a.Prefix.String()+" on "+a.Interface)
				}
				detail := fmt.Sprintf("No address in %s", nw.CIDR)
				if want != "" {
					detail += " on " + want
				}
				if len(on) > 0 {
					detail += "; found " + strings.Join(on, ", ") + " instead"
				}
				detail += ". Ray, vLLM and NCCL would fall back to the default route's address, which the other nodes may not reach (the c10d failure)."
				ifname := want
				if ifname == "" {
					ifname = "<fabric interface>"
				}
				p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("%s has no address in %s", node, nw.CIDR), detail,
					fmt.Sprintf("assign one: sudo ip addr add %s dev %s", exampleAddr(nw.CIDR), ifname))
				continue
			}
			if other, dup := seen[addr]; dup {
				p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("%s and %s share the fabric address %s", other, node, addr),
					"Ray identifies nodes by IP: two nodes with one address register as one.", "give each node its own address in "+nw.CIDR.String())
			}
			seen[addr] = node
		}
		// Routes: every node must reach every peer over the fabric.
		for _, node := range nw.Nodes {
			hf := p.host(node)
			if hf == nil {
				continue
			}
			iface := p.ifaces[node]
			for _, rc := range hf.RouteChecks {
				if rc.Peer == "" || !contains(nw.Nodes, rc.Peer) {
					continue
				}
				switch {
				case rc.Err != "":
					p.finding(plan.Error, nw.Addr, node, fmt.Sprintf("%s has no route to %s's fabric address %s", node, rc.Peer, rc.Addr),
						rc.Err, fmt.Sprintf("check that %s and %s are on the same fabric subnet (%s) and the link is up", node, rc.Peer, nw.CIDR))
				case iface != "" && rc.Dev != "" && rc.Dev != iface:
					p.finding(plan.Error, nw.Addr, node,
						fmt.Sprintf("%s routes to %s (%s) via %s, not the fabric interface %s", node, rc.Peer, rc.Addr, rc.Dev, iface),
						"Traffic to the peer would leave on the wrong network (asymmetric routing); NCCL and c10d connections may hang or fail.",
						fmt.Sprintf("remove the conflicting route on %s (ip route show to match %s) so that %s is reached via %s", node, rc.Addr, rc.Addr, iface))
				}
			}
		}
	}
}

func exampleAddr(cidr netip.Prefix) string {
	a := cidr.Addr().Next()
	return netip.PrefixFrom(a, cidr.Bits()).String()
}

// observedContainer is a cluster's container on one node, as found.
type observedContainer struct {
	c     observe.Container
	found bool
}

func (p *planner) container(node, name string) observedContainer {
	hf := p.host(node)
	if hf == nil {
		return observedContainer{}
	}
	c, ok := hf.Containers.ByName(name)
	return observedContainer{c: c, found: ok}
}

// clusterContainer is the cluster's container on node: the one with the
// cluster's container name, or else a managed one labelled with the
// cluster's address (created under the container_name it had before).
func (p *planner) clusterContainer(rc *config.RayCluster, node string) observedContainer {
	if oc := p.container(node, ContainerName(rc)); oc.found {
		return oc
	}
	if hf := p.host(node); hf != nil {
		for _, c := range hf.Containers.List {
			if p.managed(c) && c.Labels[LabelResource] == rc.Addr {
				return observedContainer{c: c, found: true}
			}
		}
	}
	return observedContainer{}
}

func (p *planner) managed(c observe.Container) bool {
	return c.Labels[LabelManaged] == "true" && c.Labels[LabelProject] == p.in.Project
}

func (p *planner) cluster(rc *config.RayCluster) {
	if p.clusterAction == nil {
		p.clusterAction = map[string]plan.Action{}
	}
	addr := rc.Addr
	nodes := rc.Nodes()
	if len(rc.Workers) > 0 && rc.Network == "" {
		p.finding(plan.Error, addr, "", "multi-node cluster without a network binding",
			"Without a network, Ray registers each node under its default route's address and vLLM's c10d master listens there; a worker that cannot reach that address fails with \"The client socket has failed to connect to any network address of (<ip>, <port>)\" after the model starts loading.",
			"declare a network block with the fabric's cidr and interface, and set network = network.<name> on the cluster")
	}
	specs := ClusterSpecs(p.cfg, rc, p.addrs, p.ifaces)
	name := ContainerName(rc)
	work := &ClusterWork{Name: rc.Name, Specs: specs, Start: map[string]bool{}}
	if len(specs) > 0 {
		work.HeadAddr = specs[0].HeadAddr
	}
	var reasons []string
	var drift []string
	// driftHost is the node of the first drift found: where to look.
	driftHost := ""
	replace := false
	foreign := false
	missing := 0
	observed := 0
	schema := clusterSchema()
	nw := p.cfg.Networks[rc.Network]
	after := map[string]attrValues{}
	for _, spec := range specs {
		after[spec.Node] = normalize(schema, clusterRecordValues(rc, spec, nodeIface(nw, spec.Node, p.ifaces)))
	}
	// before holds, per node, the attributes its container was created
	// with (read from its record).
	before := map[string]attrValues{}
	for i, spec := range specs {
		node := spec.Node
		if p.host(node) == nil {
			continue
		}
		observed++
		oc := p.clusterContainer(rc, node)
		if !oc.found {
			missing++
			work.Start[node] = true
			if i == 0 {
				replace = true
			}
			if p.stateHas(addr) {
				drift = append(drift, fmt.Sprintf("container %s on %s is gone", name, node))
				driftHost = firstNonEmpty(driftHost, node)
			}
			continue
		}
		if !p.managed(oc.c) {
			foreign = true
			p.foreignContainer(addr, node, name, oc.c)
			continue
		}
		rec, recorded := containerRecord(oc.c)
		if !recorded && oc.c.SpecHash == spec.Hash() {
			// Known from the hash alone: it is the spec.
			rec, recorded = after[node], true
		}
		if recorded {
			before[node] = rec
		}
		switch {
		case oc.c.SpecHash == "":
			// Managed labels but no spec hash: recreated by hand.
			work.Start[node] = true
			drift = append(drift, fmt.Sprintf("container %s on %s was recreated outside rayform%s", name, node, specDiff(oc.c, spec)))
			driftHost = firstNonEmpty(driftHost, node)
		case oc.c.SpecHash != spec.Hash():
			work.Start[node] = true
			what := specDiff(oc.c, spec)
			if recorded {
				what = ""
				if paths := changedPaths(schema, rec, after[node]); len(paths) > 0 {
					what = ": " + strings.Join(paths, ", ")
				}
			}
			reasons = append(reasons, fmt.Sprintf("the container spec on %s changed%s", node, what))
		case !oc.c.Running:
			work.Start[node] = true
			drift = append(drift, fmt.Sprintf("container %s on %s is %s (exit code %d)", name, node, oc.c.State, oc.c.ExitCode))
			driftHost = firstNonEmpty(driftHost, node)
		}
		if work.Start[node] {
			work.Remove = append(work.Remove, Removal{Node: node, Container: oc.c.Name})
			if i == 0 {
				replace = true
			}
		}
		if !recorded {
			// Made by a rayform that kept no record: what docker shows.
			rec = attrValues{"image": cty.StringVal(oc.c.Image)}
			if n, ok := after[node]["node"]; ok {
				rec["node"] = withAddress(n, oc.c.Labels[LabelNodeIP])
			}
			before[node] = rec
		}
	}
	if !foreign && work.Start[rc.Head] {
		if oc := p.container(rc.Head, name); !(oc.found && oc.c.Running && p.managed(oc.c)) {
			p.portsFree(addr, rc.Head, "The Ray head of "+addr, []portUse{{rc.Port, "port"}, {rc.DashboardPort, "dashboard_port"}})
		}
	}
	rayObserved := map[string]map[string]string{}
	// Ray's own node table: every node ALIVE under its fabric address.
	if head := p.host(rc.Head); head != nil && !foreign && len(specs) > 0 {
		p.checkRayTable(rc, head, specs, work, &drift, &driftHost, &replace, rayObserved)
	}
	if p.in.Replace[addr] && !foreign && missing < len(specs) {
		replace = true
		reasons = append(reasons, "replacement requested with -replace")
	}
	// Managed containers of this cluster on nodes no longer in it.
	for _, r := range p.strayRemovals(rc, name) {
		work.Remove = append(work.Remove, r)
		reasons = append(reasons, fmt.Sprintf("%s is no longer a worker", r.Node))
		oc := p.clusterContainer(rc, r.Node)
		rec, ok := containerRecord(oc.c)
		if !ok {
			rec = attrValues{"node": withAddress(after[rc.Head]["node"], oc.c.Labels[LabelNodeIP])}
		}
		before[r.Node] = rec
	}
	action := plan.NoOp
	switch {
	case foreign:
		action = plan.NoOp
	case observed > 0 && missing == len(specs) && len(work.Remove) == 0:
		action = plan.Create
	case replace:
		action = plan.Replace
		// The head goes first: every node restarts against the new head.
		work.Remove = nil
		for _, spec := range specs {
			work.Start[spec.Node] = true
			if oc := p.clusterContainer(rc, spec.Node); oc.found && p.managed(oc.c) {
				work.Remove = append(work.Remove, Removal{Node: spec.Node, Container: oc.c.Name})
			}
		}
		work.Remove = append(work.Remove, p.strayRemovals(rc, name)...)
	case len(work.Start) > 0 || len(work.Remove) > 0:
		action = plan.Update
	}
	p.clusterAction[rc.Name] = action
	if len(drift) > 0 {
		p.res.Plan.Drift = append(p.res.Plan.Drift, plan.Drift{Address: addr, Host: firstNonEmpty(driftHost, rc.Head), Summary: strings.Join(drift, "; "),
			Attrs: clusterDriftAttrs(specs, rayObserved)})
	}
	rcChange := plan.ResourceChange{Address: addr, Type: "ray_cluster", Name: rc.Name, Action: action, Hosts: nodes,
		Reasons: append(drift, reasons...)}
	rcChange.Attrs = clusterAttrs(rc, specs, action, before, after, rayObserved)
	p.res.Plan.Changes = append(p.res.Plan.Changes, rcChange)
	if action != plan.NoOp {
		p.res.Work[addr] = &Work{Address: addr, Type: "ray_cluster", Action: action, Cluster: work, Hosts: nodes}
	}
}

// foreignContainer reports a container in the way that this project did
// not create. One carrying rayform's labels for another project is most
// likely this very deployment applied from another checkout (the project
// defaults to the configuration directory's name) and may be serving: the
// fix names the project to declare and never suggests removing it.
func (p *planner) foreignContainer(addr, node, name string, c observe.Container) {
	if other := c.Labels[LabelProject]; c.Labels[LabelManaged] == "true" && other != "" {
		p.finding(plan.Error, addr, node, fmt.Sprintf("a container named %s on %s belongs to rayform project %q, not %q", name, node, other, p.in.Project),
			fmt.Sprintf("It runs %s (%s) with rayform's labels for project %q (%s). rayform only touches its own project's containers; the project is the configuration's rayform { project = ... }, or else the configuration directory's name, so the same configuration in another checkout is another project.", c.Image, c.State, other, firstNonEmpty(c.Labels[LabelResource], "no resource label")),
			fmt.Sprintf("if it is this deployment, declare rayform { project = %q } in the configuration; if it is another one, set container_name on this cluster", other))
		return
	}
	p.finding(plan.Error, addr, node, fmt.Sprintf("a container named %s on %s was not created by rayform", name, node),
		fmt.Sprintf("It runs %s (%s). rayform never touches containers it did not create.", c.Image, c.State),
		fmt.Sprintf("remove it yourself (ssh %s docker rm -f %s) if it is a leftover, or set container_name on the cluster", node, name))
}

// strayRemovals are managed containers of the cluster on nodes not in it.
func (p *planner) strayRemovals(rc *config.RayCluster, name string) []Removal {
	var out []Removal
	for _, node := range slices.Sorted(maps.Keys(p.facts.Hosts)) {
		out = append(out, p.strayRemovalsOn(rc, node)...)
	}
	return out
}

// strayRemovalsOn is the cluster's managed container on node when node is
// not in the cluster.
func (p *planner) strayRemovalsOn(rc *config.RayCluster, node string) []Removal {
	if contains(rc.Nodes(), node) {
		return nil
	}
	if oc := p.clusterContainer(rc, node); oc.found && p.managed(oc.c) && oc.c.Labels[LabelResource] == rc.Addr {
		return []Removal{{Node: node, Container: oc.c.Name}}
	}
	return nil
}

// checkRayTable judges Ray's node table (judgeRayTable, as apply's
// verification does): a difference on the head replaces the cluster, one
// on a worker restarts that worker, and an ALIVE node that is none of the
// cluster's is an error. rayObserved collects, per node, what Ray reports
// where it differs from the declaration ("address", "gpus").
func (p *planner) checkRayTable(rc *config.RayCluster, head *observe.HostFacts, specs []ContainerSpec, work *ClusterWork, drift *[]string, driftHost *string, replace *bool, rayObserved map[string]map[string]string) {
	if head.RayNodes.Err != "" || head.RayNodes.Source == "" {
		// The head container runs but Ray does not answer: restart it.
		if oc := p.clusterContainer(rc, rc.Head); oc.found && oc.c.Running && !work.Start[rc.Head] {
			*drift = append(*drift, "Ray does not answer on "+rc.Head+": "+firstNonEmpty(head.RayNodes.Err, "no node table"))
			*driftHost = firstNonEmpty(*driftHost, rc.Head)
			*replace = true
		}
		return
	}
	// When the head restarts, every node registers anew: only what the
	// table says of the head is worth reporting.
	headRestarts := work.Start[rc.Head]
	unknownAddr := false
	for _, s := range specs {
		unknownAddr = unknownAddr || s.NodeIP == ""
	}
	owners := p.addressOwners(rc)
	observed := func(node, attr, v string) {
		if rayObserved[node] == nil {
			rayObserved[node] = map[string]string{}
		}
		rayObserved[node][attr] = v
	}
	for _, d := range judgeRayTable(specs, head.RayNodes.List) {
		if headRestarts && !d.Head {
			continue
		}
		node := d.Node
		if node == "" {
			node = owners[d.IP]
			if node == "" && unknownAddr {
				// Perhaps the node whose address is not known yet.
				continue
			}
			if node == "" {
				p.finding(plan.Error, rc.Addr, rc.Head, d.Reason,
					"Ray's node table on "+rc.Head+" has a node that is none of the cluster's: another host joined this head, or a node registered under an address rayform does not know.",
					"stop Ray on that host (ray stop), or declare it as a worker of "+rc.Addr)
				continue
			}
			if !contains(rc.Nodes(), node) {
				// A node that left the cluster: its container is removed
				// (see strayRemovals), which takes it out of the table.
				if len(p.strayRemovalsOn(rc, node)) == 0 {
					p.finding(plan.Error, rc.Addr, rc.Head, d.Reason, fmt.Sprintf("%s runs Ray in this cluster but is not one of its nodes, and rayform did not start it there.", node),
						fmt.Sprintf("stop Ray on %s (ray stop), or declare it as a worker of %s", node, rc.Addr))
				}
				continue
			}
			observed(node, "address", d.IP)
		} else if d.Attr != "" {
			observed(node, d.Attr, d.Observed)
		}
		if work.Start[node] && node != rc.Head {
			// Restarted anyway; the difference is still drift, unless it
			// comes from an address not known yet.
			if nodeIP(specs, node) != "" {
				*drift = append(*drift, d.Reason)
				*driftHost = firstNonEmpty(*driftHost, node)
			}
			continue
		}
		*drift = append(*drift, d.Reason)
		*driftHost = firstNonEmpty(*driftHost, node)
		if d.Head || node == rc.Head {
			*replace = true
			continue
		}
		work.Start[node] = true
		name := ContainerName(rc)
		if oc := p.clusterContainer(rc, node); oc.found {
			name = oc.c.Name
		}
		work.Remove = append(work.Remove, Removal{Node: node, Container: name})
	}
}

// nodeIP is the fabric address node's spec starts Ray with.
func nodeIP(specs []ContainerSpec, node string) string {
	for _, s := range specs {
		if s.Node == node {
			return s.NodeIP
		}
	}
	return ""
}

// addressOwners maps every address a node is known by (its SSH address,
// the addresses its host holds, the address its container of the cluster
// was started with) to the node.
func (p *planner) addressOwners(rc *config.RayCluster) map[string]string {
	out := map[string]string{}
	for _, node := range slices.Sorted(maps.Keys(p.facts.Hosts)) {
		if n := p.cfg.Nodes[node]; n != nil {
			out[n.Host] = node
		}
		if hf := p.host(node); hf != nil {
			for _, a := range hf.Addresses.List {
				out[a.Prefix.Addr().String()] = node
			}
		}
		if oc := p.clusterContainer(rc, node); oc.found && oc.c.Labels[LabelNodeIP] != "" {
			out[oc.c.Labels[LabelNodeIP]] = node
		}
	}
	return out
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// specDiff names what differs between an observed container and its spec,
// as far as the observation shows it.
func specDiff(c observe.Container, spec ContainerSpec) string {
	var what []string
	if c.Image != spec.Image {
		what = append(what, fmt.Sprintf("image %s → %s", c.Image, spec.Image))
	}
	if ip := c.Labels[LabelNodeIP]; ip != spec.NodeIP {
		what = append(what, fmt.Sprintf("node IP %s → %s", orNone(ip), orNone(spec.NodeIP)))
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if contains(spec.SecretEnv, k) || !c.Inspected {
			continue
		}
		if v, ok := c.Env[k]; ok && v != spec.Env[k] {
			what = append(what, fmt.Sprintf("%s %s → %s", k, v, spec.Env[k]))
		} else if !ok && contains(observe.DefaultEnvKeys(), k) {
			what = append(what, fmt.Sprintf("%s unset → %s", k, spec.Env[k]))
		}
	}
	if len(what) == 0 {
		return ""
	}
	return ": " + strings.Join(what, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func (p *planner) stateHas(addr string) bool {
	if p.in.State == nil {
		return false
	}
	_, ok := p.in.State.Get(addr)
	return ok
}

func strVal(s string) cty.Value {
	if s == "" {
		return cty.UnknownVal(cty.String)
	}
	return cty.StringVal(s)
}

// clusterAttrs lists the cluster's attributes, before (from the
// containers' records) and after (from the specs); the per-node values are
// gathered in "nodes". rayObserved are the values Ray's node table reports
// where they differ from the record: the table is the truth.
func clusterAttrs(rc *config.RayCluster, specs []ContainerSpec, action plan.Action, before, after map[string]attrValues, rayObserved map[string]map[string]string) []plan.AttrChange {
	if len(specs) == 0 {
		return nil
	}
	afterRes := attrValues{}
	for k, v := range after[rc.Head] {
		afterRes[k] = v
	}
	afterNodes := map[string]cty.Value{}
	for _, s := range specs {
		afterNodes[s.Node] = after[s.Node]["node"]
	}
	delete(afterRes, "node")
	afterRes["nodes"] = cty.MapVal(afterNodes)
	beforeRes := attrValues{}
	if action != plan.Create {
		// The head's record speaks for the cluster; a worker's, when the
		// head has none.
		src := before[rc.Head]
		for _, s := range specs {
			if src == nil {
				src = before[s.Node]
			}
		}
		for k, v := range src {
			beforeRes[k] = v
		}
		// What no record says is taken as unchanged.
		for k, v := range afterRes {
			if _, ok := beforeRes[k]; !ok {
				beforeRes[k] = v
			}
		}
		delete(beforeRes, "node")
		nodes := map[string]cty.Value{}
		for n, vals := range before {
			if v, ok := vals["node"]; ok {
				if ip, ok := rayObserved[n]["address"]; ok {
					v = withAddress(v, ip)
				}
				if g, ok := rayObserved[n]["gpus"]; ok {
					v = withGPUs(v, g)
				}
				nodes[n] = v
			}
		}
		beforeRes["nodes"] = cty.NullVal(cty.Map(nodeAttrType()))
		if len(nodes) > 0 {
			beforeRes["nodes"] = cty.MapVal(nodes)
		}
	}
	return attrChanges(clusterPlanSchema(), beforeRes, afterRes)
}

// withAddress is a node object with its address replaced (unknown when
// ip is empty).
func withAddress(node cty.Value, ip string) cty.Value {
	if node == cty.NilVal || !node.Type().IsObjectType() {
		return node
	}
	m := node.AsValueMap()
	m["address"] = strVal(ip)
	return cty.ObjectVal(m)
}

// withGPUs is a node object with its GPU count replaced.
func withGPUs(node cty.Value, gpus string) cty.Value {
	if node == cty.NilVal || !node.Type().IsObjectType() {
		return node
	}
	v, err := cty.ParseNumberVal(gpus)
	if err != nil {
		return node
	}
	m := node.AsValueMap()
	m["gpus"] = v
	return cty.ObjectVal(m)
}

// containerRecord reads the attributes a container was created with from
// its LabelAttrs label.
func containerRecord(c observe.Container) (attrValues, bool) {
	l, ok := c.Labels[LabelAttrs]
	if !ok {
		return nil, false
	}
	rec, ok := decodeRecordLabel(l)
	if !ok {
		return nil, false
	}
	return decodeAttrs(clusterSchema(), rawAttrs(rec), rec.Sensitive), true
}

func listOrEmpty(vs []cty.Value) cty.Value {
	if len(vs) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	return cty.ListVal(vs)
}

func clusterDriftAttrs(specs []ContainerSpec, rayObserved map[string]map[string]string) []plan.AttrChange {
	var attrs []plan.AttrChange
	for _, s := range specs {
		if v, ok := rayObserved[s.Node]["address"]; ok && s.NodeIP != "" && v != s.NodeIP {
			attrs = append(attrs, plan.AttrChange{Name: "node_ip[" + strconv.Quote(s.Node) + "]", Before: cty.StringVal(s.NodeIP), After: cty.StringVal(v)})
		}
	}
	return attrs
}

func (p *planner) serve(sv *config.VLLMServe) {
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

// portUse is a port a resource will listen on and the argument that sets
// it.
type portUse struct {
	port int
	attr string
}

// portsFree reports, as errors, the ports that something already listens
// on at node, where what (of resource addr) is about to listen: with host
// networking it would fail to bind ("address already in use"). It names
// the holder as ss shows it (often a second deployment on the same nodes).
func (p *planner) portsFree(addr, node, what string, uses []portUse) {
	hf := p.host(node)
	if hf == nil {
		return
	}
	for _, u := range uses {
		ls := hf.Listening.On(u.port)
		if u.port == 0 || len(ls) == 0 {
			continue
		}
		var holders []string
		for _, l := range ls {
			h := l.Addr
			if l.Process != "" {
				h += fmt.Sprintf(" by %s (pid %d)", l.Process, l.PID)
			}
			holders = append(holders, h)
		}
		detail := fmt.Sprintf("Something already listens on %s on %s. %s would fail to start there with \"address already in use\": rayform's containers use the host's network.",
			strings.Join(holders, ", "), node, what)
		if ls[0].Process == "" {
			detail += " (ss names the process only to root or its owner.)"
		}
		p.finding(plan.Error, addr, node, fmt.Sprintf("port %d on %s is already in use", u.port, node), detail,
			fmt.Sprintf("stop what holds it, or set %s = <a free port> on %s", u.attr, addr))
	}
}

// changedNodes are the nodes whose container the cluster's work starts or
// removes, sorted.
func (p *planner) changedNodes(rc *config.RayCluster) []string {
	w := p.res.Work[rc.Addr]
	if w == nil || w.Cluster == nil {
		return nil
	}
	set := map[string]bool{}
	for n := range w.Cluster.Start {
		set[n] = true
	}
	for _, rm := range w.Cluster.Remove {
		set[rm.Node] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func modelsDrift(v observe.VLLM, spec ServeSpec) string {
	if v.ModelsCheck.Status != 200 {
		return ""
	}
	for _, m := range v.Models {
		if m.ID == spec.ServedName {
			if spec.MaxModelLen > 0 && m.MaxModelLen != spec.MaxModelLen {
				return fmt.Sprintf("vLLM serves %s with max_model_len %d; want %d", m.ID, m.MaxModelLen, spec.MaxModelLen)
			}
			return ""
		}
	}
	var ids []string
	for _, m := range v.Models {
		ids = append(ids, m.ID)
	}
	return fmt.Sprintf("vLLM serves %s; want %s", strings.Join(ids, ", "), spec.ServedName)
}

// serveAttrs are the serve's attributes; before values come from the record
// apply wrote beside the process.
func serveAttrs(sv *config.VLLMServe, spec ServeSpec, action plan.Action, rec observe.ServeRecord) []plan.AttrChange {
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
func (p *planner) capacity(sv *config.VLLMServe, rc *config.RayCluster) {
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
func (p *planner) memoryMonitor(sv *config.VLLMServe, rc *config.RayCluster) {
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

// removed plans the destruction of resources that left the configuration,
// from the hosts the state remembers.
func (p *planner) removed() {
	if p.in.State == nil {
		return
	}
	for _, addr := range p.in.State.Addresses() {
		if configHas(p.cfg, addr) {
			continue
		}
		r, _ := p.in.State.Get(addr)
		pa := plan.ParseAddress(addr)
		typ, name := pa.Type, pa.Instance()
		var hosts []string
		for _, h := range r.Hosts {
			hosts = append(hosts, h.Node)
		}
		w := &Work{Address: addr, Type: typ, Action: plan.Delete, Hosts: hosts}
		found := false
		switch typ {
		case "ray_cluster":
			w.Cluster = &ClusterWork{Name: name, Start: map[string]bool{}}
			for _, h := range r.Hosts {
				if oc := p.container(h.Node, r.Container); oc.found && p.managed(oc.c) && oc.c.Labels[LabelResource] == addr {
					w.Cluster.Remove = append(w.Cluster.Remove, Removal{Node: h.Node, Container: r.Container})
					found = true
				}
			}
		case "vllm_serve":
			if len(r.Hosts) > 0 {
				if hf := p.host(r.Hosts[0].Node); hf != nil {
					if rec := hf.Serves[name]; rec.Found && rec.Alive {
						found = true
					}
				}
			}
			w.Serve = &ServeWork{Spec: ServeSpec{Resource: addr, Name: name, Container: r.Container, Node: firstHost(r.Hosts)}, Stop: true}
		}
		action := plan.Delete
		if !found {
			action = plan.NoOp
		}
		w.Action = action
		p.res.Plan.Changes = append(p.res.Plan.Changes, plan.ResourceChange{Address: addr, Type: typ, Name: name, Action: action, Hosts: hosts,
			Reasons: []string{"not in the configuration any more"},
			Attrs:   []plan.AttrChange{{Name: "hosts", Before: listOrEmpty(stringVals(hosts)), After: cty.NullVal(cty.List(cty.String))}}})
		// Even a resource already gone is forgotten by apply.
		p.res.Work[addr] = w
	}
}

func firstHost(hs []state.Host) string {
	if len(hs) == 0 {
		return ""
	}
	return hs[0].Node
}

func stringVals(ss []string) []cty.Value {
	var out []cty.Value
	for _, s := range ss {
		out = append(out, cty.StringVal(s))
	}
	return out
}

// outputs lists the root outputs with what applying the plan does to
// them: created with a resource they refer to (or, for one that refers to
// none, on a first apply), updated when what they show of those resources
// changes, and left alone (not shown as a change) otherwise.
func (p *planner) outputs() {
	changes := map[string]plan.ResourceChange{}
	for _, ch := range p.res.Plan.Changes {
		changes[ch.Address] = ch
	}
	exported := map[string]map[string]bool{"ray_cluster": exportedAttrs(clusterPlanSchema()), "vllm_serve": exportedAttrs(serveSchema())}
	first := p.in.State == nil || len(p.in.State.Addresses()) == 0
	g := p.cfg.Graph()
	for _, name := range slices.Sorted(maps.Keys(p.cfg.Outputs)) {
		o := p.cfg.Outputs[name]
		oc := plan.OutputChange{Name: name, Value: o.Value, Sensitive: o.Sensitive, Action: plan.NoOp}
		// An output that is one attribute of a resource it refers to
		// changes with that attribute; any other changes when the resource
		// is created or one of its exported attributes changes.
		onResources := false
		var same, changed []plan.AttrChange
		for _, dep := range g.DependenciesOf("output." + name) {
			ch, ok := changes[dep]
			if !ok {
				continue
			}
			onResources = true
			if ch.Action == plan.Create {
				oc.Action = plan.Create
			}
			for _, a := range ch.Attrs {
				if !exported[ch.Type][a.Name] {
					continue
				}
				if a.After.RawEquals(o.Value) {
					same = append(same, a)
				}
				if a.Changed() {
					changed = append(changed, a)
				}
			}
		}
		switch {
		case oc.Action == plan.Create:
		case !onResources:
			if first {
				oc.Action = plan.Create
			}
		case len(same) > 0:
			for _, a := range same {
				if a.Changed() {
					oc.Action, oc.Before = plan.Update, a.Before
				}
			}
		case len(changed) > 0:
			oc.Action = plan.Update
		}
		p.res.Plan.Outputs = append(p.res.Plan.Outputs, oc)
	}
}

func exportedAttrs(schema []attr) map[string]bool {
	out := map[string]bool{}
	for _, a := range schema {
		if a.exported {
			out[a.name] = true
		}
	}
	return out
}

// HostFingerprints digests, per host, the facts a plan depends on, so a
// saved plan can be refused (naming the host) when the hosts changed since
// it was made.
func HostFingerprints(facts *observe.Facts) map[string]string {
	out := map[string]string{}
	for name, hf := range facts.Hosts {
		var parts []string
		parts = append(parts, "err "+hf.Err)
		for _, a := range hf.Addresses.List {
			parts = append(parts, "addr "+a.Interface+"="+a.Prefix.String())
		}
		for _, c := range hf.Containers.List {
			parts = append(parts, fmt.Sprintf("container %s %s %s %v %s", c.Name, c.ID, c.SpecHash, c.Running, c.StartedAt.UTC().Format(time.RFC3339Nano)))
		}
		for _, n := range hf.RayNodes.List {
			parts = append(parts, "ray "+n.NodeIP+" "+n.State)
		}
		for k, sr := range hf.Serves {
			parts = append(parts, fmt.Sprintf("serve %s %s %v", k, sr.SpecHash, sr.Alive))
		}
		for _, im := range hf.Images {
			parts = append(parts, fmt.Sprintf("image %s %v %s", im.Ref, im.Present, im.ID))
		}
		parts = append(parts, fmt.Sprintf("health %d", hf.VLLM.Health.Status))
		sort.Strings(parts)
		sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
		out[name] = hex.EncodeToString(sum[:8])
	}
	return out
}
