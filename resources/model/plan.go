package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
)

// Resolution is a model's manifest as the hub listed it for the plan, or
// why it could not be listed (Err, with its cause and fix), or, when the
// hub did not answer, as a node recorded it (Recorded).
type Resolution struct {
	Manifest Manifest
	Err      error
	// Recorded, when set, says that the hub did not answer and Manifest
	// is the newest record of the revision on the nodes: the nodes are
	// judged against it, and nothing is downloaded.
	Recorded *Recorded
}

// ResolveTimeout bounds the hub's answers for one model at plan time.
const ResolveTimeout = time.Minute

// ResolveOrRecall asks the hub for m's manifest (Resolve, bounded by
// ResolveTimeout). When the hub does not answer (UnavailableError: no
// answer, a timeout, a 5xx; never a refusal), the newest record of m's
// revision on nodes, as facts show them, stands in for it (Recorded);
// with none, the hub's error stays. A nil hc is HubClient's.
func ResolveOrRecall(ctx context.Context, hc *http.Client, m *Model, nodes []string, facts func(node string) *observe.HostFacts) Resolution {
	if hc == nil {
		hc = HubClient(ResolveTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	mf, err := Resolve(ctx, hc, m.Endpoint, m.Token, m.Source, m.Rev)
	if err == nil || !IsUnavailable(err) || facts == nil {
		return Resolution{Manifest: mf, Err: err}
	}
	if rec := newestRecord(m, nodes, facts); rec != nil {
		rec.HubErr = err
		return Resolution{Manifest: rec.Manifest, Recorded: rec}
	}
	return Resolution{Err: err}
}

// PlanInput is what a model's plan is computed from (no I/O).
type PlanInput struct {
	Model *Model
	// Resolution is the hub's manifest of the model; nil when the model
	// was not resolved (the plan then shows nothing for it).
	Resolution *Resolution
	// Nodes are the nodes that load the model (every node of the clusters
	// whose serves use it), a cluster's head first: a complete copy there
	// is preferred as the source.
	Nodes []string
	// Facts are a node's observed facts, nil when it could not be observed.
	Facts func(node string) *observe.HostFacts
	// Addrs are the nodes' fabric addresses.
	Addrs map[string]netip.Addr
	// Nets are the networks of the nodes' clusters, by node (a node
	// absent has none): a node receives only from a node whose fabric
	// address is in its network's subnet.
	Nets map[string]Net
	// Layout, when set, is where the model lies on a node; by default the
	// Hugging Face cache at the model's cache_dir, the same path on every
	// node. (Tests of nodes sharing one filesystem give each its own.)
	Layout func(node string) Layout
}

// Net is a network a node is on: its name and subnet.
type Net struct {
	Name   string
	Subnet netip.Prefix
}

// Planned is a model's part of the plan.
type Planned struct {
	Change   plan.ResourceChange
	Findings []plan.Finding
	// Work is what apply stages; nil when every node has a complete copy
	// (or the plan has errors for the model).
	Work *Work
}

// Work is what apply does for a model: the decision's staging.
type Work struct {
	Model    *Model
	Manifest Manifest
	Decision Decision
	// Layouts are where the model lies on each node.
	Layouts map[string]Layout
	// Addrs are the nodes' fabric addresses: a source serves on its own,
	// receivers connect to it.
	Addrs map[string]netip.Addr
}

// address is a model block's resource address.
func address(m *Model) string {
	if m.Addr != "" {
		return m.Addr
	}
	return Type + "." + m.Name
}

// at is the file:line of the model block, "" when unknown.
func at(m *Model) string {
	r := m.DeclRange
	if r.Filename == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}

// Plan judges every node's copy of in.Model and plans its staging: a
// change with one line per node (complete, partial or absent, how much to
// stage, from where, the free space), an error finding for a hub refusal
// or a node without the space, and the work apply carries out.
func Plan(in PlanInput) Planned {
	m := in.Model
	addr := address(m)
	ch := plan.ResourceChange{Address: addr, Type: Type, Name: m.Name, Action: plan.NoOp, Hosts: in.Nodes}
	out := Planned{}
	if in.Resolution == nil || len(in.Nodes) == 0 {
		out.Change = ch
		return out
	}
	if err := in.Resolution.Err; err != nil {
		detail, fix := err.Error(), "check that the hub at "+m.Endpoint+" is reachable from this machine (the model's endpoint), then plan again"
		if IsUnavailable(err) {
			detail += fmt.Sprintf("; no node holds a list of %s@%s recorded by an earlier apply (apply records it next to the model's files once a node's copy is verified), so the nodes cannot be judged without the hub",
				m.Source, m.Rev)
			fix = "make the hub at " + m.Endpoint + " reachable from this machine (the model's endpoint), then plan again"
		} else if i := strings.LastIndex(detail, "; "); i >= 0 {
			// Resolve's refusals end with their fix after the last "; ".
			detail, fix = detail[:i], detail[i+2:]
		}
		out.Findings = append(out.Findings, plan.Finding{Severity: plan.Error, Address: addr, At: at(m),
			Summary: "the hub's list of " + m.Source + "@" + m.Rev + " could not be read", Detail: detail + ". Nothing was changed on the nodes.",
			Fix: fix})
		out.Change = ch
		return out
	}
	mf := in.Resolution.Manifest
	if rec := in.Resolution.Recorded; rec != nil {
		out.Findings = append(out.Findings, recordedFinding(m, rec))
	}
	facts := in.Facts
	if facts == nil {
		facts = func(string) *observe.HostFacts { return nil }
	}
	copies := m.Copies(in.Nodes, facts)
	if in.Layout != nil {
		for i := range copies {
			c := &copies[i]
			c.Layout = in.Layout(c.Node)
			c.Tree = observe.TreeFacts{FreeBytes: -1, Err: "not observed"}
			if f := facts(c.Node); f != nil {
				if t, ok := f.Trees[c.Layout.Dir]; ok {
					c.Tree = t
				}
			}
		}
	}
	for i := range copies {
		c := &copies[i]
		c.Net, c.Subnet, c.Addr = in.Nets[c.Node].Name, in.Nets[c.Node].Subnet, in.Addrs[c.Node]
	}
	for _, c := range copies {
		if c.Tree.Exists && !c.Tree.Hashed && c.Tree.IDsErr != "" {
			out.Findings = append(out.Findings, plan.Finding{Severity: plan.Warning, Address: addr, Host: c.Node,
				Summary: fmt.Sprintf("%s: the files of %s not stored with LFS could not be verified: judged by their sizes alone", c.Node, m.Source),
				Detail:  fmt.Sprintf("The probe could not compute their git blob ids in %s: %s.", c.Layout.Dir, c.Tree.IDsErr),
				Fix:     "install sha1sum (coreutils) on " + c.Node})
		}
	}
	d := Decide(mf, copies)
	ch.Reasons = d.Lines()
	ch.Attrs = attrs(m, mf, d)
	if len(d.Receivers) == 0 {
		out.Change = ch
		return out
	}
	ch.Action = plan.Update
	if !d.Complete() {
		ch.Action = plan.Create
	}
	if rec := in.Resolution.Recorded; rec != nil {
		// What only the hub could give: the networks without a complete
		// copy.
		for _, t := range d.Transfers() {
			if !t.Download {
				continue
			}
			where := ""
			if n := in.Nets[t.From]; n.Name != "" && len(copies) > 0 && d.nets > 1 {
				where = " on network " + n.Name
			}
			out.Findings = append(out.Findings, plan.Finding{Severity: plan.Error, Address: addr, At: at(m),
				Summary: fmt.Sprintf("%s cannot be staged: no node%s has a complete copy of %s@%s to receive it from, and the hub did not answer", strings.Join(append([]string{t.From}, t.To...), ", "), where, m.Source, m.Rev),
				Detail:  fmt.Sprintf("%v. Nothing was changed on the nodes.", rec.HubErr),
				Fix:     "make the hub at " + m.Endpoint + " reachable from this machine and the nodes, then plan again"})
		}
	}
	for _, e := range d.Errors {
		node, msg, _ := strings.Cut(e, ": ")
		out.Findings = append(out.Findings, plan.Finding{Severity: plan.Error, Address: addr, Host: node,
			Summary: fmt.Sprintf("not enough disk space on %s for %s", node, m.Source),
			Detail:  msg, Fix: "free the space, or set cache_dir on " + addr + " to a filesystem with room; apply stops before staging anything"})
	}
	for _, n := range d.Receivers {
		if facts(n) == nil {
			out.Findings = append(out.Findings, plan.Finding{Severity: plan.Error, Address: addr, Host: n,
				Summary: fmt.Sprintf("%s could not be observed: what it holds of %s is unknown", n, m.Source),
				Fix:     "make the node reachable over SSH and plan again"})
		}
	}
	// A node others receive from serves on its fabric address: a
	// source, or a downloader when others of its network receive from it.
	for _, t := range d.Transfers() {
		if len(t.To) > 0 && !in.Addrs[t.From].IsValid() {
			out.Findings = append(out.Findings, plan.Finding{Severity: plan.Error, Address: addr, Host: t.From,
				Summary: fmt.Sprintf("%s has no fabric address to serve %s to the other nodes from", t.From, m.Source),
				Fix:     "see the network's findings: the receivers connect to the source's fabric address"})
		}
	}
	out.Change = ch
	if slices.ContainsFunc(out.Findings, func(f plan.Finding) bool { return f.Severity == plan.Error }) {
		return out
	}
	w := &Work{Model: m, Manifest: mf, Decision: d, Layouts: map[string]Layout{}, Addrs: map[string]netip.Addr{}}
	for _, c := range copies {
		w.Layouts[c.Node] = c.Layout
		if a, ok := in.Addrs[c.Node]; ok {
			w.Addrs[c.Node] = a
		}
	}
	out.Work = w
	return out
}

// recordedFinding is the warning of a plan made without the hub: the
// hub, why it did not answer, and which node's record of when the nodes
// were judged against.
func recordedFinding(m *Model, rec *Recorded) plan.Finding {
	cause := rec.HubErr
	var ue *UnavailableError
	if errors.As(cause, &ue) {
		cause = ue.Err
	}
	moved := ""
	if !IsCommit(m.Rev) {
		moved = fmt.Sprintf("; if %s has moved on the hub since, this plan cannot see it", m.Rev)
	}
	return plan.Finding{Severity: plan.Warning, Address: address(m), At: at(m),
		Summary: fmt.Sprintf("the hub at %s did not answer: judging the nodes against the list of %s@%s recorded on %s", m.Endpoint, m.Source, m.Rev, rec.Node),
		Detail: fmt.Sprintf("The hub did not answer (%v). The list (commit %s, %d files, %s) was recorded on %s at %s, when its copy was verified%s; nothing is downloaded until the hub answers.",
			cause, rec.Commit, len(rec.Files), GB(rec.Bytes()), rec.Node, rec.RecordedAt.UTC().Format(time.RFC3339), moved),
		Fix: fmt.Sprintf("nothing, to keep serving commit %s; to see whether %s moved, make the hub at %s reachable from this machine (the model's endpoint) and plan again", rec.Commit[:12], m.Rev, m.Endpoint)}
}

// attrs are the model's attributes as plan shows them: what it is and
// where it goes (the token is never shown), and each node's copy, as it
// is and as apply leaves it (complete): what an update changes, shown in
// the resource's body.
func attrs(m *Model, mf Manifest, d Decision) []plan.AttrChange {
	val := func(name, v string) plan.AttrChange {
		return plan.AttrChange{Name: name, Before: cty.StringVal(v), After: cty.StringVal(v)}
	}
	out := []plan.AttrChange{
		val("source", m.Source),
		val("revision", m.Rev),
		val("commit", mf.Commit),
		val("cache_dir", m.CacheDir),
		val("size", fmt.Sprintf("%s in %d files", GB(mf.Bytes()), len(mf.Files))),
	}
	if len(d.Judgments) == 0 {
		return out
	}
	before, after := map[string]cty.Value{}, map[string]cty.Value{}
	for _, j := range d.Judgments {
		before[j.Node] = cty.StringVal(j.State.String())
		after[j.Node] = cty.StringVal(Complete.String())
	}
	return append(out, plan.AttrChange{Name: "copies", Before: cty.MapVal(before), After: cty.MapVal(after)})
}

// Container is "": a model runs in no container of its own (kind.WorkDetail).
func (w *Work) Container() string { return "" }
