package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/attrs"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/network"
)

// clusterContainer is the cluster's container on node: the one with the
// cluster's container name, or else a managed one labelled with the
// cluster's address (created under the container_name it had before).
func (p *planner) clusterContainer(rc *RayCluster, node string) hostplan.ObservedContainer {
	if oc := p.Container(node, ContainerName(rc)); oc.Found {
		return oc
	}
	if hf := p.Host(node); hf != nil {
		for _, c := range hf.Containers.List {
			if p.managed(c) && c.Labels[LabelResource] == rc.Addr {
				return hostplan.ObservedContainer{C: c, Found: true}
			}
		}
	}
	return hostplan.ObservedContainer{}
}

// clusterPlan is what planning one ray_cluster gathers while it judges
// the nodes' containers and Ray's node table: the work, and why.
type clusterPlan struct {
	rc *RayCluster
	// name is the containers' name on every node.
	name  string
	specs []ContainerSpec
	work  *ClusterWork
	// reasons are the configuration's changes; drift what changed on the
	// hosts, first seen on driftHost (where to look).
	reasons   []string
	drift     []string
	driftHost string
	// replace is set when the whole cluster restarts (its head does).
	replace bool
	// foreign is set when a container of its name is not rayform's: the
	// cluster is left alone.
	foreign bool
	// observed counts the nodes observed, missing those without the
	// cluster's container.
	observed, missing int
	schema            []attrs.Attr
	nw                *network.Network
	// before holds, per node, the attributes its container was created
	// with (read from its record); after those it is declared with.
	before, after map[string]attrs.Values
	// rayObserved is what Ray reports per node where it differs from the
	// declaration ("address", "gpus").
	rayObserved map[string]map[string]string
}

// drifted notes a change on node made outside rayform.
func (cp *clusterPlan) drifted(node, why string) {
	cp.drift = append(cp.drift, why)
	cp.driftHost = hostplan.FirstNonEmpty(cp.driftHost, node)
}

// cluster plans one ray_cluster: each node's container against its spec,
// then Ray's node table, then the action and its work.
func (p *planner) cluster(rc *RayCluster) {
	p.needDocker(rc.Nodes())
	cp := p.newClusterPlan(rc)
	for i, spec := range cp.specs {
		p.judgeContainer(cp, i == 0, spec)
	}
	if !cp.foreign && cp.work.Start[rc.Head] {
		p.headPortsFree(rc, cp.name)
	}
	// Ray's own node table: every node ALIVE under its fabric address.
	if head := p.Host(rc.Head); head != nil && !cp.foreign && len(cp.specs) > 0 {
		p.checkRayTable(cp, head)
	}
	if p.Replace(rc.Addr) && !cp.foreign && cp.missing < len(cp.specs) {
		cp.replace = true
		cp.reasons = append(cp.reasons, "replacement requested with -replace")
	}
	p.removeStrays(cp)
	p.reportCluster(cp, p.clusterAction(cp))
}

// needDocker finds the nodes where docker is not usable: the cluster's
// containers need it on every node.
func (p *planner) needDocker(nodes []string) {
	for _, n := range nodes {
		if hf := p.Host(n); hf != nil && !hf.Docker.Available {
			p.Find(plan.Error, nodeAddr(p.cfg, n), n, fmt.Sprintf("docker is not usable on %s", n), hf.Docker.Err,
				"install Docker and let the SSH user run it (e.g. add it to the docker group)")
		}
	}
}

// newClusterPlan starts rc's plan from its declared containers.
func (p *planner) newClusterPlan(rc *RayCluster) *clusterPlan {
	// A cluster with workers always has a network here: the configuration
	// refuses one without (checkRayCluster, "Multi-node cluster without a
	// network binding").
	specs := ClusterSpecs(p.cfg, rc, p.fab.Addrs, p.fab.Ifaces)
	name := ContainerName(rc)
	cp := &clusterPlan{rc: rc, name: name, specs: specs, schema: clusterSchema(), nw: p.cfg.Networks[rc.Network],
		work:   &ClusterWork{Name: rc.Name, ContainerName: name, Specs: specs, Start: map[string]bool{}},
		before: map[string]attrs.Values{}, after: map[string]attrs.Values{}, rayObserved: map[string]map[string]string{}}
	if len(specs) > 0 {
		cp.work.HeadAddr = specs[0].HeadAddr
	}
	for _, spec := range specs {
		cp.after[spec.Node] = attrs.Normalize(cp.schema, clusterRecordValues(rc, spec, nodeIface(cp.nw, spec.Node, p.fab.Ifaces)))
	}
	return cp
}

// judgeContainer compares the container on spec's node with spec: a
// missing, changed, hand-made or stopped container (re)starts (head is
// set for the head's, which restarts the whole cluster); one that is not
// rayform's leaves the cluster alone.
func (p *planner) judgeContainer(cp *clusterPlan, head bool, spec ContainerSpec) {
	node := spec.Node
	if p.Host(node) == nil {
		return
	}
	cp.observed++
	oc := p.clusterContainer(cp.rc, node)
	switch {
	case !oc.Found:
		cp.missing++
		cp.work.Start[node] = true
		cp.replace = cp.replace || head
		if p.StateHas(cp.rc.Addr) {
			cp.drifted(node, fmt.Sprintf("container %s on %s is gone", cp.name, node))
		}
		return
	case !p.managed(oc.C):
		cp.foreign = true
		p.foreignContainer(cp.rc.Addr, node, cp.name, oc.C)
		return
	}
	rec, recorded, current := p.madeWith(cp, spec, oc.C)
	cp.judgeSpec(spec, oc.C, rec, recorded, current)
	if cp.work.Start[node] {
		cp.work.Remove = append(cp.work.Remove, Removal{Node: node, Container: oc.C.Name})
		cp.replace = cp.replace || head
	}
}

// madeWith is what the container c on spec's node was made with: its
// record, or the spec itself when its hash says so (recorded is false
// when neither tells), and whether it is current. cp.before takes it, or
// what docker shows of a container made by a rayform that kept no record.
func (p *planner) madeWith(cp *clusterPlan, spec ContainerSpec, c observe.Container) (rec attrs.Values, recorded, current bool) {
	node := spec.Node
	current, legacy := spec.Current(c.SpecHash)
	rec, recorded = containerRecord(c)
	if spec.SecretKey != nil && (legacy || recorded && rec.UnkeyedDigests()) {
		// Made by an earlier rayform, which digested secrets without
		// the key: its secrets are compared in that form (and, when
		// its hash is the unkeyed one, it is current; apply keys it
		// when it recreates the container for another reason).
		cp.after[node] = attrs.Normalize(cp.schema, clusterRecordValues(cp.rc, spec.unkeyed(), nodeIface(cp.nw, node, p.fab.Ifaces)))
	}
	if !recorded && current {
		// Known from the hash alone: it is the spec.
		rec, recorded = cp.after[node], true
	}
	if !current && recorded && c.SpecHash != "" && hostplan.OnlyUnknown(&cp.rc.Decl, attrs.ChangedPaths(cp.schema, rec, cp.after[node])) {
		// It differs only in values this run was not given (a
		// read-only command without a secret): not judged.
		current = true
	}
	if recorded {
		cp.before[node] = rec
		return rec, recorded, current
	}
	// Made by a rayform that kept no record: what docker shows.
	shown := attrs.Values{"image": cty.StringVal(c.Image)}
	if n, ok := cp.after[node]["node"]; ok {
		shown["node"] = withAddress(n, c.Labels[LabelNodeIP])
	}
	cp.before[node] = shown
	return rec, recorded, current
}

// judgeSpec restarts the container c of spec's node when it was recreated
// by hand, its spec changed, or it does not run.
func (cp *clusterPlan) judgeSpec(spec ContainerSpec, c observe.Container, rec attrs.Values, recorded, current bool) {
	node := spec.Node
	switch {
	case c.SpecHash == "":
		// Managed labels but no spec hash: recreated by hand.
		cp.work.Start[node] = true
		cp.drifted(node, fmt.Sprintf("container %s on %s was recreated outside rayform%s", cp.name, node, specDiff(c, spec)))
	case !current:
		cp.work.Start[node] = true
		what := specDiff(c, spec)
		if recorded {
			what = ""
			if paths := attrs.ChangedPaths(cp.schema, rec, cp.after[node]); len(paths) > 0 {
				what = ": " + strings.Join(paths, ", ")
			} else {
				what = ": rayform defines the container differently since it was made (an upgrade of rayform; README: Security)"
			}
		}
		cp.reasons = append(cp.reasons, fmt.Sprintf("the container spec on %s changed%s", node, what))
	case !c.Running:
		cp.work.Start[node] = true
		cp.drifted(node, fmt.Sprintf("container %s on %s is %s (exit code %d)", cp.name, node, c.State, c.ExitCode))
	}
}

// headPortsFree finds what holds the head's ports when a new head starts
// where no container of the cluster runs.
func (p *planner) headPortsFree(rc *RayCluster, name string) {
	oc := p.Container(rc.Head, name)
	if oc.Found && oc.C.Running && p.managed(oc.C) {
		return
	}
	// A stopped container of ours is replaced: removed before the new head
	// starts, so a process of it still dying holds no port the new head
	// needs.
	own := ""
	if oc.Found && p.managed(oc.C) {
		own = name
	}
	p.PortsFree(rc.Addr, rc.Head, "The Ray head of "+rc.Addr, own, []hostplan.PortUse{{Port: rc.Port, Attr: "port"}, {Port: rc.DashboardPort, Attr: "dashboard_port"}})
}

// removeStrays removes the cluster's managed containers on nodes no
// longer in it.
func (p *planner) removeStrays(cp *clusterPlan) {
	rc := cp.rc
	for _, r := range p.strayRemovals(rc, cp.name) {
		cp.work.Remove = append(cp.work.Remove, r)
		cp.reasons = append(cp.reasons, fmt.Sprintf("%s is no longer a worker", r.Node))
		oc := p.clusterContainer(rc, r.Node)
		rec, ok := containerRecord(oc.C)
		if !ok {
			rec = attrs.Values{"node": withAddress(cp.after[rc.Head]["node"], oc.C.Labels[LabelNodeIP])}
		}
		cp.before[r.Node] = rec
	}
}

// clusterAction is the cluster's action; a replacement restarts every
// node, the head first.
func (p *planner) clusterAction(cp *clusterPlan) plan.Action {
	work := cp.work
	switch {
	case cp.foreign:
		return plan.NoOp
	case cp.observed > 0 && cp.missing == len(cp.specs) && len(work.Remove) == 0:
		return plan.Create
	case cp.replace:
		// The head goes first: every node restarts against the new head.
		work.Remove = nil
		for _, spec := range cp.specs {
			work.Start[spec.Node] = true
			if oc := p.clusterContainer(cp.rc, spec.Node); oc.Found && p.managed(oc.C) {
				work.Remove = append(work.Remove, Removal{Node: spec.Node, Container: oc.C.Name})
			}
		}
		work.Remove = append(work.Remove, p.strayRemovals(cp.rc, cp.name)...)
		return plan.Replace
	case len(work.Start) > 0 || len(work.Remove) > 0:
		return plan.Update
	}
	return plan.NoOp
}

// reportCluster hands the cluster's drift, change and work to the plan.
func (p *planner) reportCluster(cp *clusterPlan, action plan.Action) {
	rc := cp.rc
	if action != plan.NoOp {
		p.gpuStack(rc, cp.work.Start)
	}
	if len(cp.drift) > 0 {
		p.Drift(plan.Drift{Address: rc.Addr, Host: hostplan.FirstNonEmpty(cp.driftHost, rc.Head), Summary: strings.Join(cp.drift, "; "),
			Attrs: clusterDriftAttrs(cp.specs, cp.rayObserved)})
	}
	rcChange := plan.ResourceChange{Address: rc.Addr, Type: Type, Name: rc.Name, Action: action, Hosts: rc.Nodes(),
		Reasons: append(cp.drift, cp.reasons...)}
	rcChange.Attrs = clusterAttrs(rc, cp.specs, action, cp.before, cp.after, cp.rayObserved)
	p.Change(rcChange)
	if action != plan.NoOp {
		p.AddWork(&kind.Work{Address: rc.Addr, Type: Type, Action: action, Do: cp.work, Hosts: rc.Nodes()})
	}
}

// foreignContainer reports a container in the way that this project did
// not create. One carrying rayform's labels for another project is most
// likely this very deployment applied from another checkout (the project
// defaults to the configuration directory's name) and may be serving: the
// fix names the project to declare and never suggests removing it.
func (p *planner) foreignContainer(addr, node, name string, c observe.Container) {
	if other := c.Labels[LabelProject]; c.Labels[LabelManaged] == "true" && other != "" {
		p.Find(plan.Error, addr, node, fmt.Sprintf("a container named %s on %s belongs to rayform project %q, not %q", name, node, other, p.Project()),
			fmt.Sprintf("It runs %s (%s) with rayform's labels for project %q (%s). rayform only touches its own project's containers; the project is the configuration's rayform { project = ... }, or else the configuration directory's name, so the same configuration in another checkout is another project.", c.Image, c.State, other, hostplan.FirstNonEmpty(c.Labels[LabelResource], "no resource label")),
			fmt.Sprintf("if it is this deployment, declare rayform { project = %q } in the configuration; if it is another one, set container_name on this cluster", other))
		return
	}
	p.Find(plan.Error, addr, node, fmt.Sprintf("a container named %s on %s was not created by rayform", name, node),
		fmt.Sprintf("It runs %s (%s). rayform never touches containers it did not create.", c.Image, c.State),
		fmt.Sprintf("remove it yourself (ssh %s docker rm -f %s) if it is a leftover, or set container_name on the cluster", node, name))
}

// strayRemovals are managed containers of the cluster on nodes not in it.
func (p *planner) strayRemovals(rc *RayCluster, name string) []Removal {
	var out []Removal
	for _, node := range slices.Sorted(maps.Keys(p.fab.Facts.Hosts)) {
		out = append(out, p.strayRemovalsOn(rc, node)...)
	}
	return out
}

// strayRemovalsOn is the cluster's managed container on node when node is
// not in the cluster.
func (p *planner) strayRemovalsOn(rc *RayCluster, node string) []Removal {
	if slices.Contains(rc.Nodes(), node) {
		return nil
	}
	if oc := p.clusterContainer(rc, node); oc.Found && p.managed(oc.C) && oc.C.Labels[LabelResource] == rc.Addr {
		return []Removal{{Node: node, Container: oc.C.Name}}
	}
	return nil
}

// checkRayTable judges Ray's node table (judgeRayTable, as apply's
// verification does): a difference on the head replaces the cluster, one
// on a worker restarts that worker, and an ALIVE node that is none of the
// cluster's is an error. Ray not answering in a running head container
// (nothing listens, an error status, Ray's own failure) replaces the
// cluster; a table that could not be read (RayNodeFacts.Unread, or no
// answer in the probe's output) is unknown: a warning, never drift.
// cp.rayObserved collects, per node, what Ray reports where it differs
// from the declaration ("address", "gpus").
func (p *planner) checkRayTable(cp *clusterPlan, head *observe.HostFacts) {
	rc := cp.rc
	table, ok := p.rayAnswer(cp, head)
	if !ok {
		return
	}
	// When the head restarts, every node registers anew: only what the
	// table says of the head is worth reporting.
	headRestarts := cp.work.Start[rc.Head]
	unknownAddr := false
	for _, s := range cp.specs {
		unknownAddr = unknownAddr || s.NodeIP == ""
	}
	owners := p.addressOwners(rc)
	for _, d := range judgeRayTable(cp.specs, table.List) {
		if headRestarts && !d.Head {
			continue
		}
		if node, ok := p.rayDiffNode(cp, d, owners, unknownAddr); ok {
			p.rayDrift(cp, d, node)
		}
	}
}

// rayAnswer is the head's Ray node table when Ray answered with one; a
// table that could not be read is a warning, a Ray that does not answer in
// a running head container drift that replaces the cluster. It also warns
// when the cluster's token authentication is not on.
func (p *planner) rayAnswer(cp *clusterPlan, head *observe.HostFacts) (RayNodeFacts, bool) {
	rc := cp.rc
	table := RayTable(head, rc)
	oc := p.clusterContainer(rc, rc.Head)
	headRuns := oc.Found && oc.C.Running && !cp.work.Start[rc.Head]
	if table.Unread || table.Source == "" {
		// Slow, too large, malformed or missing: unknown, never drift.
		if headRuns {
			p.Find(plan.Warning, rc.Addr, rc.Head, "Ray's node table on "+rc.Head+" could not be read: "+hostplan.FirstNonEmpty(table.Err, "no answer in the probe's output"),
				"A reading that is slow, too large or malformed says nothing of the cluster: it is taken as unknown, and nothing is restarted or replaced for it. The next plan reads the table again.",
				"plan again; if it persists, look at the head (rayform diagnose), or replace the cluster deliberately with -replace="+rc.Addr)
		}
		return table, false
	}
	if mode := RayAuthMode(head, rc); rc.Auth == AuthToken && (mode == AuthModeDisabled || mode == AuthModeUnsupported) && headRuns {
		p.Find(plan.Warning, rc.Addr, rc.Head, rc.Addr+" is open: its Ray does not run token authentication ("+mode+")",
			"auth = \"token\" hands Ray RAY_AUTH_MODE=token, but the head's dashboard reports authentication "+mode+": a Ray older than 2.52 ignores the variable, so anyone who reaches the cluster's ports can join it and run code in it.",
			"use an image with Ray 2.52 or later, or set auth = \"none\" to keep the cluster open on purpose")
	}
	if table.Err != "" {
		// The head container runs but Ray does not answer: restart it.
		if headRuns {
			cp.drifted(rc.Head, "Ray does not answer on "+rc.Head+": "+hostplan.FirstNonEmpty(table.Err, "no node table"))
			cp.replace = true
		}
		return table, false
	}
	return table, true
}

// rayDiffNode is the cluster's node a difference of the table is about,
// noting what Ray reports of it; ok is false when it is none of the
// cluster's nodes (an error unless rayform removes it anyway) or perhaps
// the node whose address is not known yet.
func (p *planner) rayDiffNode(cp *clusterPlan, d rayTableDiff, owners map[string]string, unknownAddr bool) (string, bool) {
	rc := cp.rc
	if d.Node != "" {
		if d.Attr != "" {
			cp.rayObservedAs(d.Node, d.Attr, d.Observed)
		}
		return d.Node, true
	}
	node := owners[d.IP]
	switch {
	case node == "" && unknownAddr:
		// Perhaps the node whose address is not known yet.
		return "", false
	case node == "":
		p.Find(plan.Error, rc.Addr, rc.Head, d.Reason,
			"Ray's node table on "+rc.Head+" has a node that is none of the cluster's: another host joined this head, or a node registered under an address rayform does not know.",
			"stop Ray on that host (ray stop), or declare it as a worker of "+rc.Addr)
		return "", false
	case !slices.Contains(rc.Nodes(), node):
		// A node that left the cluster: its container is removed (see
		// strayRemovals), which takes it out of the table.
		if len(p.strayRemovalsOn(rc, node)) == 0 {
			p.Find(plan.Error, rc.Addr, rc.Head, d.Reason, fmt.Sprintf("%s runs Ray in this cluster but is not one of its nodes, and rayform did not start it there.", node),
				fmt.Sprintf("stop Ray on %s (ray stop), or declare it as a worker of %s", node, rc.Addr))
		}
		return "", false
	}
	cp.rayObservedAs(node, "address", d.IP)
	return node, true
}

// rayObservedAs notes that Ray reports attr of node as v.
func (cp *clusterPlan) rayObservedAs(node, attr, v string) {
	if cp.rayObserved[node] == nil {
		cp.rayObserved[node] = map[string]string{}
	}
	cp.rayObserved[node][attr] = v
}

// rayDrift is the table's difference d on node as drift: the head's
// replaces the cluster, a worker's restarts the worker. A difference the
// configuration's own change explains is not drift.
func (p *planner) rayDrift(cp *clusterPlan, d rayTableDiff, node string) {
	rc, work := cp.rc, cp.work
	if p.declChanged(rc, cp.specs, node) {
		return // the configuration's change, replaced for it
	}
	if work.Start[node] && node != rc.Head {
		// Restarted anyway; the difference is still drift, unless it
		// comes from an address not known yet.
		if nodeIP(cp.specs, node) != "" {
			cp.drifted(node, d.Reason)
		}
		return
	}
	cp.drifted(node, d.Reason)
	if d.Head || node == rc.Head {
		cp.replace = true
		return
	}
	work.Start[node] = true
	name := ContainerName(rc)
	if oc := p.clusterContainer(rc, node); oc.Found {
		name = oc.C.Name
	}
	work.Remove = append(work.Remove, Removal{Node: node, Container: name})
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
func (p *planner) addressOwners(rc *RayCluster) map[string]string {
	out := map[string]string{}
	for _, node := range slices.Sorted(maps.Keys(p.fab.Facts.Hosts)) {
		if n := p.cfg.Nodes[node]; n != nil {
			out[n.Host] = node
		}
		if hf := p.Host(node); hf != nil {
			for _, a := range hf.Addresses.List {
				out[a.Prefix.Addr().String()] = node
			}
		}
		if oc := p.clusterContainer(rc, node); oc.Found && oc.C.Labels[LabelNodeIP] != "" {
			out[oc.C.Labels[LabelNodeIP]] = node
		}
	}
	return out
}

// specDiff names what differs between an observed container and its spec,
// as far as the observation shows it.
func specDiff(c observe.Container, spec ContainerSpec) string {
	var what []string
	if c.Image != spec.Image {
		what = append(what, fmt.Sprintf("image %s → %s", c.Image, spec.Image))
	}
	if ip := c.Labels[LabelNodeIP]; ip != spec.NodeIP {
		what = append(what, fmt.Sprintf("node IP %s → %s", hostplan.OrNone(ip), hostplan.OrNone(spec.NodeIP)))
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if slices.Contains(spec.SecretEnv, k) || !c.Inspected {
			continue
		}
		if v, ok := c.Env[k]; ok && v != spec.Env[k] {
			what = append(what, fmt.Sprintf("%s %s → %s", k, v, spec.Env[k]))
		} else if !ok && slices.Contains(hostplan.EnvKeys(), k) {
			what = append(what, fmt.Sprintf("%s unset → %s", k, spec.Env[k]))
		}
	}
	if len(what) == 0 {
		return ""
	}
	return ": " + strings.Join(what, ", ")
}

// clusterAttrs lists the cluster's attributes, before (from the
// containers' records) and after (from the specs); the per-node values are
// gathered in "nodes". rayObserved are the values Ray's node table reports
// where they differ from the record: the table is the truth.
func clusterAttrs(rc *RayCluster, specs []ContainerSpec, action plan.Action, before, after map[string]attrs.Values, rayObserved map[string]map[string]string) []plan.AttrChange {
	if len(specs) == 0 {
		return nil
	}
	afterRes := attrs.Values{}
	for k, v := range after[rc.Head] {
		afterRes[k] = v
	}
	afterNodes := map[string]cty.Value{}
	for _, s := range specs {
		afterNodes[s.Node] = after[s.Node]["node"]
	}
	delete(afterRes, "node")
	afterRes["nodes"] = cty.MapVal(afterNodes)
	beforeRes := attrs.Values{}
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
	return attrs.Changes(clusterPlanSchema(), beforeRes, afterRes)
}

// withAddress is a node object with its address replaced (unknown when
// ip is empty).
func withAddress(node cty.Value, ip string) cty.Value {
	if node == cty.NilVal || !node.Type().IsObjectType() {
		return node
	}
	m := node.AsValueMap()
	m["address"] = hostplan.StrVal(ip)
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
func containerRecord(c observe.Container) (attrs.Values, bool) {
	l, ok := c.Labels[LabelAttrs]
	if !ok {
		return nil, false
	}
	rec, ok := attrs.DecodeRecordLabel(l)
	if !ok {
		return nil, false
	}
	return attrs.Decode(clusterSchema(), attrs.Raw(rec), rec.Sensitive), true
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

// Restarts are the nodes whose container the cluster's work starts or
// removes, sorted (kind.Restarter): a serve on them restarts.
func (w *ClusterWork) Restarts() []string {
	set := map[string]bool{}
	for n := range w.Start {
		set[n] = true
	}
	for _, rm := range w.Remove {
		set[rm.Node] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// nodeAddr is the address of node's block (node.NAME).
func nodeAddr(cfg *Blocks, node string) string {
	if n := cfg.Nodes[node]; n != nil {
		return n.Addr
	}
	return nodeType + "." + node
}

func (p *planner) managed(c observe.Container) bool {
	return c.Labels[LabelManaged] == "true" && c.Labels[LabelProject] == p.Project()
}
