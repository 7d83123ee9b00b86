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
	"github.com/rayform/rayform/resources/kit"
)

// clusterContainer is the cluster's container on node: the one with the
// cluster's container name, or else a managed one labelled with the
// cluster's address (created under the container_name it had before).
func (p *planner) clusterContainer(rc *RayCluster, node string) kit.ObservedContainer {
	if oc := p.Container(node, ContainerName(rc)); oc.Found {
		return oc
	}
	if hf := p.Host(node); hf != nil {
		for _, c := range hf.Containers.List {
			if p.managed(c) && c.Labels[LabelResource] == rc.Addr {
				return kit.ObservedContainer{C: c, Found: true}
			}
		}
	}
	return kit.ObservedContainer{}
}

func (p *planner) cluster(rc *RayCluster) {
	addr := rc.Addr
	nodes := rc.Nodes()
	// Its containers need docker on every node.
	for _, n := range nodes {
		if hf := p.Host(n); hf != nil && !hf.Docker.Available {
			p.Find(plan.Error, nodeAddr(p.cfg, n), n, fmt.Sprintf("docker is not usable on %s", n), hf.Docker.Err,
				"install Docker and let the SSH user run it (e.g. add it to the docker group)")
		}
	}
	// A cluster with workers always has a network here: the configuration
	// refuses one without (checkRayCluster, "Multi-node cluster without a
	// network binding").
	specs := ClusterSpecs(p.cfg, rc, p.fab.Addrs, p.fab.Ifaces)
	name := ContainerName(rc)
	work := &ClusterWork{Name: rc.Name, ContainerName: name, Specs: specs, Start: map[string]bool{}}
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
	after := map[string]attrs.Values{}
	for _, spec := range specs {
		after[spec.Node] = attrs.Normalize(schema, clusterRecordValues(rc, spec, nodeIface(nw, spec.Node, p.fab.Ifaces)))
	}
	// before holds, per node, the attributes its container was created
	// with (read from its record).
	before := map[string]attrs.Values{}
	for i, spec := range specs {
		node := spec.Node
		if p.Host(node) == nil {
			continue
		}
		observed++
		oc := p.clusterContainer(rc, node)
		if !oc.Found {
			missing++
			work.Start[node] = true
			if i == 0 {
				replace = true
			}
			if p.StateHas(addr) {
				drift = append(drift, fmt.Sprintf("container %s on %s is gone", name, node))
				driftHost = kit.FirstNonEmpty(driftHost, node)
			}
			continue
		}
		if !p.managed(oc.C) {
			foreign = true
			p.foreignContainer(addr, node, name, oc.C)
			continue
		}
		current, legacy := spec.Current(oc.C.SpecHash)
		rec, recorded := containerRecord(oc.C)
		if spec.SecretKey != nil && (legacy || recorded && rec.UnkeyedDigests()) {
			// Made by an earlier rayform, which digested secrets without
			// the key: its secrets are compared in that form (and, when
			// its hash is the unkeyed one, it is current; apply keys it
			// when it recreates the container for another reason).
			after[node] = attrs.Normalize(schema, clusterRecordValues(rc, spec.unkeyed(), nodeIface(nw, node, p.fab.Ifaces)))
		}
		if !recorded && current {
			// Known from the hash alone: it is the spec.
			rec, recorded = after[node], true
		}
		if recorded {
			before[node] = rec
		}
		if !current && recorded && oc.C.SpecHash != "" && kit.OnlyUnknown(&rc.Decl, attrs.ChangedPaths(schema, rec, after[node])) {
			// It differs only in values this run was not given (a
			// read-only command without a secret): not judged.
			current = true
		}
		switch {
		case oc.C.SpecHash == "":
			// Managed labels but no spec hash: recreated by hand.
			work.Start[node] = true
			drift = append(drift, fmt.Sprintf("container %s on %s was recreated outside rayform%s", name, node, specDiff(oc.C, spec)))
			driftHost = kit.FirstNonEmpty(driftHost, node)
		case !current:
			work.Start[node] = true
			what := specDiff(oc.C, spec)
			if recorded {
				what = ""
				if paths := attrs.ChangedPaths(schema, rec, after[node]); len(paths) > 0 {
					what = ": " + strings.Join(paths, ", ")
				} else {
					what = ": rayform defines the container differently since it was made (an upgrade of rayform; README: Security)"
				}
			}
			reasons = append(reasons, fmt.Sprintf("the container spec on %s changed%s", node, what))
		case !oc.C.Running:
			work.Start[node] = true
			drift = append(drift, fmt.Sprintf("container %s on %s is %s (exit code %d)", name, node, oc.C.State, oc.C.ExitCode))
			driftHost = kit.FirstNonEmpty(driftHost, node)
		}
		if work.Start[node] {
			work.Remove = append(work.Remove, Removal{Node: node, Container: oc.C.Name})
			if i == 0 {
				replace = true
			}
		}
		if !recorded {
			// Made by a rayform that kept no record: what docker shows.
			rec = attrs.Values{"image": cty.StringVal(oc.C.Image)}
			if n, ok := after[node]["node"]; ok {
				rec["node"] = withAddress(n, oc.C.Labels[LabelNodeIP])
			}
			before[node] = rec
		}
	}
	if !foreign && work.Start[rc.Head] {
		if oc := p.Container(rc.Head, name); !(oc.Found && oc.C.Running && p.managed(oc.C)) {
			// A stopped container of ours is replaced: removed before the
			// new head starts, so a process of it still dying holds no
			// port the new head needs.
			own := ""
			if oc.Found && p.managed(oc.C) {
				own = name
			}
			p.PortsFree(addr, rc.Head, "The Ray head of "+addr, own, []kit.PortUse{{Port: rc.Port, Attr: "port"}, {Port: rc.DashboardPort, Attr: "dashboard_port"}})
		}
	}
	rayObserved := map[string]map[string]string{}
	// Ray's own node table: every node ALIVE under its fabric address.
	if head := p.Host(rc.Head); head != nil && !foreign && len(specs) > 0 {
		p.checkRayTable(rc, head, specs, work, &drift, &driftHost, &replace, rayObserved)
	}
	if p.Replace(addr) && !foreign && missing < len(specs) {
		replace = true
		reasons = append(reasons, "replacement requested with -replace")
	}
	// Managed containers of this cluster on nodes no longer in it.
	for _, r := range p.strayRemovals(rc, name) {
		work.Remove = append(work.Remove, r)
		reasons = append(reasons, fmt.Sprintf("%s is no longer a worker", r.Node))
		oc := p.clusterContainer(rc, r.Node)
		rec, ok := containerRecord(oc.C)
		if !ok {
			rec = attrs.Values{"node": withAddress(after[rc.Head]["node"], oc.C.Labels[LabelNodeIP])}
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
			if oc := p.clusterContainer(rc, spec.Node); oc.Found && p.managed(oc.C) {
				work.Remove = append(work.Remove, Removal{Node: spec.Node, Container: oc.C.Name})
			}
		}
		work.Remove = append(work.Remove, p.strayRemovals(rc, name)...)
	case len(work.Start) > 0 || len(work.Remove) > 0:
		action = plan.Update
	}
	if action != plan.NoOp {
		p.gpuStack(rc, work.Start)
	}
	if len(drift) > 0 {
		p.Drift(plan.Drift{Address: addr, Host: kit.FirstNonEmpty(driftHost, rc.Head), Summary: strings.Join(drift, "; "),
			Attrs: clusterDriftAttrs(specs, rayObserved)})
	}
	rcChange := plan.ResourceChange{Address: addr, Type: Type, Name: rc.Name, Action: action, Hosts: nodes,
		Reasons: append(drift, reasons...)}
	rcChange.Attrs = clusterAttrs(rc, specs, action, before, after, rayObserved)
	p.Change(rcChange)
	if action != plan.NoOp {
		p.AddWork(&kind.Work{Address: addr, Type: Type, Action: action, Do: work, Hosts: nodes})
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
			fmt.Sprintf("It runs %s (%s) with rayform's labels for project %q (%s). rayform only touches its own project's containers; the project is the configuration's rayform { project = ... }, or else the configuration directory's name, so the same configuration in another checkout is another project.", c.Image, c.State, other, kit.FirstNonEmpty(c.Labels[LabelResource], "no resource label")),
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
// answer in the probe's output) is unknown: a warning, never drift. rayObserved collects, per node, what Ray reports
// where it differs from the declaration ("address", "gpus").
func (p *planner) checkRayTable(rc *RayCluster, head *observe.HostFacts, specs []ContainerSpec, work *ClusterWork, drift *[]string, driftHost *string, replace *bool, rayObserved map[string]map[string]string) {
	table := RayTable(head, rc)
	if table.Unread || table.Source == "" {
		// Slow, too large, malformed or missing: unknown, never drift.
		if oc := p.clusterContainer(rc, rc.Head); oc.Found && oc.C.Running && !work.Start[rc.Head] {
			p.Find(plan.Warning, rc.Addr, rc.Head, "Ray's node table on "+rc.Head+" could not be read: "+kit.FirstNonEmpty(table.Err, "no answer in the probe's output"),
				"A reading that is slow, too large or malformed says nothing of the cluster: it is taken as unknown, and nothing is restarted or replaced for it. The next plan reads the table again.",
				"plan again; if it persists, look at the head (rayform diagnose), or replace the cluster deliberately with -replace="+rc.Addr)
		}
		return
	}
	if mode := RayAuthMode(head, rc); rc.Auth == AuthToken && (mode == AuthModeDisabled || mode == AuthModeUnsupported) {
		if oc := p.clusterContainer(rc, rc.Head); oc.Found && oc.C.Running && !work.Start[rc.Head] {
			p.Find(plan.Warning, rc.Addr, rc.Head, rc.Addr+" is open: its Ray does not run token authentication ("+mode+")",
				"auth = \"token\" hands Ray RAY_AUTH_MODE=token, but the head's dashboard reports authentication "+mode+": a Ray older than 2.52 ignores the variable, so anyone who reaches the cluster's ports can join it and run code in it.",
				"use an image with Ray 2.52 or later, or set auth = \"none\" to keep the cluster open on purpose")
		}
	}
	if table.Err != "" {
		// The head container runs but Ray does not answer: restart it.
		if oc := p.clusterContainer(rc, rc.Head); oc.Found && oc.C.Running && !work.Start[rc.Head] {
			*drift = append(*drift, "Ray does not answer on "+rc.Head+": "+kit.FirstNonEmpty(table.Err, "no node table"))
			*driftHost = kit.FirstNonEmpty(*driftHost, rc.Head)
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
	for _, d := range judgeRayTable(specs, table.List) {
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
				p.Find(plan.Error, rc.Addr, rc.Head, d.Reason,
					"Ray's node table on "+rc.Head+" has a node that is none of the cluster's: another host joined this head, or a node registered under an address rayform does not know.",
					"stop Ray on that host (ray stop), or declare it as a worker of "+rc.Addr)
				continue
			}
			if !slices.Contains(rc.Nodes(), node) {
				// A node that left the cluster: its container is removed
				// (see strayRemovals), which takes it out of the table.
				if len(p.strayRemovalsOn(rc, node)) == 0 {
					p.Find(plan.Error, rc.Addr, rc.Head, d.Reason, fmt.Sprintf("%s runs Ray in this cluster but is not one of its nodes, and rayform did not start it there.", node),
						fmt.Sprintf("stop Ray on %s (ray stop), or declare it as a worker of %s", node, rc.Addr))
				}
				continue
			}
			observed(node, "address", d.IP)
		} else if d.Attr != "" {
			observed(node, d.Attr, d.Observed)
		}
		if p.declChanged(rc, specs, node) {
			continue // the configuration's change, replaced for it
		}
		if work.Start[node] && node != rc.Head {
			// Restarted anyway; the difference is still drift, unless it
			// comes from an address not known yet.
			if nodeIP(specs, node) != "" {
				*drift = append(*drift, d.Reason)
				*driftHost = kit.FirstNonEmpty(*driftHost, node)
			}
			continue
		}
		*drift = append(*drift, d.Reason)
		*driftHost = kit.FirstNonEmpty(*driftHost, node)
		if d.Head || node == rc.Head {
			*replace = true
			continue
		}
		work.Start[node] = true
		name := ContainerName(rc)
		if oc := p.clusterContainer(rc, node); oc.Found {
			name = oc.C.Name
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
		what = append(what, fmt.Sprintf("node IP %s → %s", kit.OrNone(ip), kit.OrNone(spec.NodeIP)))
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if slices.Contains(spec.SecretEnv, k) || !c.Inspected {
			continue
		}
		if v, ok := c.Env[k]; ok && v != spec.Env[k] {
			what = append(what, fmt.Sprintf("%s %s → %s", k, v, spec.Env[k]))
		} else if !ok && slices.Contains(kit.EnvKeys(), k) {
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
	m["address"] = kit.StrVal(ip)
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
func nodeAddr(cfg *Config, node string) string {
	if n := cfg.Nodes[node]; n != nil {
		return n.Addr
	}
	return nodeType + "." + node
}

func (p *planner) managed(c observe.Container) bool {
	return c.Labels[LabelManaged] == "true" && c.Labels[LabelProject] == p.Project()
}
