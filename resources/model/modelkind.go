package model

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/network"
)

// Kind is the model kind as rayform reaches it (kind.Kind): registered
// in resources.Kinds. A model has no container of its own: plan judges
// every serving node's copy, apply stages what is missing before the walk
// (PrepareSteps), and the serve and its cluster learn from the model
// block's value (Weights: Provides, HostDir, ServeEnv, Revision, Files)
// how to load it.
type Kind struct{}

// The model kind's optional parts (kind.Kind): no steps in the walk, no
// logs, no locks of its own.
var (
	_ kind.KindWithLookup      = Kind{}
	_ kind.KindWithObserve     = Kind{}
	_ kind.KindWithPrepare     = Kind{}
	_ kind.KindWithFingerprint = Kind{}
	_ kind.KindWithStatus      = Kind{}
)

// Schema is the model block (Descriptor).
func (Kind) Schema() config.Kind { return Descriptor() }

// Traits: a model is not replaced on request and has no logs; an output
// shows what its schema exports; status lists each node's copy.
func (Kind) Traits() kind.Traits {
	return kind.Traits{Exported: kind.Exported(Descriptor()), Status: "models"}
}

// servesModel is the value of a block that loads a model (a vllm_serve):
// its model argument, which a model block's source provides.
type servesModel interface {
	ServesModel() string
}

// models are cfg's model blocks, sorted by name.
func models(cfg *config.Config) []*Model {
	var out []*Model
	blocks := cfg.Blocks(Type)
	for _, name := range slices.Sorted(maps.Keys(blocks)) {
		out = append(out, blocks[name].(*Model))
	}
	return out
}

// nodes are the nodes that load m: those of every block that serves it
// (kind.Placed), the first one's head first; nil when no block serves it.
func nodes(cfg *config.Config, m *Model) []string {
	var out []string
	for _, typ := range cfg.Kinds() {
		blocks := cfg.Blocks(typ)
		for _, name := range slices.Sorted(maps.Keys(blocks)) {
			s, ok := blocks[name].(servesModel)
			pl, placed := blocks[name].(kind.Placed)
			if !ok || !placed || !m.Provides(s.ServesModel()) {
				continue
			}
			for _, n := range pl.PlacedOn(cfg) {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// subnetter is the value of a network block: its subnet.
type subnetter interface {
	Subnet() netip.Prefix
}

// netsOf maps each node of cfg's clusters to its cluster's network (the
// blocks that put nodes on a network, network.Member, and the network
// blocks' subnets): a node receives a model only from a node whose
// fabric address is in its network's subnet.
func netsOf(cfg *config.Config) map[string]Net {
	subnets := map[string]netip.Prefix{}
	for _, typ := range cfg.Kinds() {
		for name, v := range cfg.Blocks(typ) {
			if s, ok := v.(subnetter); ok {
				subnets[name] = s.Subnet()
			}
		}
	}
	out := map[string]Net{}
	for _, typ := range cfg.Kinds() {
		blocks := cfg.Blocks(typ)
		for _, name := range slices.Sorted(maps.Keys(blocks)) {
			mb, ok := blocks[name].(network.Member)
			if !ok {
				continue
			}
			nw, ns := mb.NetworkNodes()
			if nw == "" {
				continue
			}
			for _, n := range ns {
				if _, seen := out[n]; !seen {
					out[n] = Net{Name: nw, Subnet: subnets[nw]}
				}
			}
		}
	}
	return out
}

// Lookup readies, for every served model, the question to the hub for its
// files (ResolveOrRecall, from the machine running rayform, bounded by
// ResolveTimeout under ctx), asked when a plan first needs the answer
// (Model.Resolution: the model's plan, a serve's revision) and kept on the
// block's value: a destroy, which needs neither, never asks. When the hub
// does not answer, the newest record of the revision on the nodes, as
// observed (kind.Facts.Hosts), stands in for it.
func (Kind) Lookup(ctx context.Context, cfg *config.Config) {
	f, _ := cfg.Facts.(kind.Facts)
	facts := func(n string) *observe.HostFacts { return kind.Usable(f.Hosts, n) }
	for _, m := range models(cfg) {
		ns := nodes(cfg, m)
		if len(ns) == 0 {
			continue
		}
		m.resolve = sync.OnceValue(func() *Resolution {
			r := ResolveOrRecall(ctx, nil, m, ns, facts)
			return &r
		})
	}
}

// UseResolution keeps r as the hub's answer for m (what Lookup does with
// the hub's): Plan judges the nodes' copies against its files, and the
// serve runs its commit.
func (m *Model) UseResolution(r Resolution) { m.resolve = func() *Resolution { return &r } }

// Observe lists, on every node that loads a model, its directory and the
// free space there, and reads the manifest recorded there (Record).
func (Kind) Observe(o *kind.Observation) {
	for _, m := range models(o.Config) {
		for _, n := range nodes(o.Config, m) {
			hs := o.Host(n)
			if !slices.Contains(hs.Trees, m.Dir()) {
				hs.Trees = append(hs.Trees, m.Dir())
			}
			if rp := m.recordProbe(); !slices.ContainsFunc(hs.Reads, func(r observe.ReadProbe) bool { return r.Key() == rp.Key() }) {
				hs.Reads = append(hs.Reads, rp)
			}
			o.SetHost(n, hs)
		}
	}
}

// Plan plans every served model (Plan): a change with a line per node,
// the findings, and the staging as work. A model no serve uses is a
// warning.
func (Kind) Plan(p kind.Planner) {
	cfg := p.Config()
	for _, m := range models(cfg) {
		ns := nodes(cfg, m)
		if len(ns) == 0 {
			p.Finding(plan.Finding{Severity: plan.Warning, Address: address(m), At: at(m),
				Summary: fmt.Sprintf("%s is used by no vllm_serve: nothing stages it", address(m)),
				Fix:     fmt.Sprintf("set model = %s.source on the vllm_serve that loads it, or remove the block", address(m))})
			continue
		}
		addrs := map[string]netip.Addr{}
		for _, n := range ns {
			if a, ok := p.Fabric(n); ok {
				addrs[n] = a
			}
		}
		pm := Plan(PlanInput{Model: m, Resolution: m.Resolution(), Nodes: ns, Addrs: addrs, Nets: netsOf(cfg),
			Facts: func(n string) *observe.HostFacts { return kind.Usable(p.Facts(), n) }})
		for _, f := range pm.Findings {
			p.Finding(f)
		}
		p.Change(pm.Change)
		if pm.Work != nil {
			p.AddWork(&kind.Work{Address: pm.Change.Address, Type: Type, Action: pm.Change.Action, Hosts: ns, Do: pm.Work})
		}
	}
}

// PrepareSteps stage the model (Work.Steps): they change nothing that
// runs, so apply runs them before the walk, before any serve or container
// is stopped or started, while the running serves keep serving; a
// failure leaves everything as it was.
func (Kind) PrepareSteps(req kind.StepsRequest) []apply.Step {
	env := req.Env
	mw, ok := req.Work.Do.(*Work)
	if !ok {
		return nil
	}
	conns := map[string]transport.Conn{}
	for n := range mw.Layouts {
		if c := env.Conn(n); c != nil {
			conns[n] = c
		}
	}
	// A line per receiving node as often as apply lets its other
	// progress lines through.
	return mw.Steps(conns, StageOptions{Interval: env.ProgressEvery()})
}

// Fingerprint is what a saved plan commits to of a node's model copies:
// their files, the ids of the small ones and the links' targets (not the
// free space, which moves with every write).
func (Kind) Fingerprint(hf *observe.HostFacts) []string {
	var out []string
	for _, dir := range slices.Sorted(maps.Keys(hf.Trees)) {
		t := hf.Trees[dir]
		var b strings.Builder
		for _, f := range t.Files {
			fmt.Fprintf(&b, "%s %d %v\n", f.Path, f.Size, f.Dangling)
		}
		for _, p := range slices.Sorted(maps.Keys(t.IDs)) {
			fmt.Fprintf(&b, "id %s %s\n", p, t.IDs[p])
		}
		for _, p := range slices.Sorted(maps.Keys(t.Links)) {
			fmt.Fprintf(&b, "link %s %s\n", p, t.Links[p])
		}
		out = append(out, fmt.Sprintf("tree %s %v %x %s", dir, t.Exists, sha256.Sum256([]byte(b.String())), t.Err))
	}
	return out
}

// The model block's value as the serve and its cluster read it
// (serve.Weights).

// Provides reports whether the model is what a serve's model argument
// names (model = model.NAME.source).
func (m *Model) Provides(serveModel string) bool { return m.Source == serveModel }

// HostDir is the hub cache on every host, which the cluster's containers
// mount at the same path.
func (m *Model) HostDir() string { return m.CacheDir }

// ServeEnv: vLLM loads the model from the staged cache and never reaches
// for the hub.
func (m *Model) ServeEnv() map[string]string {
	return map[string]string{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": m.CacheDir}
}

// Revision is the commit plan resolved the revision to (so that a
// revision that moves restarts the serve on the new weights, staged
// before), else the revision itself.
func (m *Model) Revision() string {
	if r := m.Resolution(); r != nil && r.Err == nil && IsCommit(r.Manifest.Commit) {
		return r.Manifest.Commit
	}
	return m.Rev
}

// Files is where config.json lies on the hosts: the revision's snapshot
// (by commit, or through refs/REVISION).
func (m *Model) Files() (dir, ref string) {
	if IsCommit(m.Rev) {
		return path.Join(m.Dir(), "snapshots", m.Rev), ""
	}
	return path.Join(m.Dir(), "snapshots", observe.RefPlaceholder), path.Join(m.Dir(), "refs", m.Rev)
}

// NodesStatus is what status shows of a model: its revision and each
// node's copy, as plan judges them.
type NodesStatus struct {
	Address  string   `json:"address"`
	Source   string   `json:"source"`
	Revision string   `json:"revision"`
	Commit   string   `json:"commit,omitempty"`
	Nodes    []string `json:"nodes"`
	// Error is why the hub's list could not be read ("" when it was).
	Error string `json:"error,omitempty"`
	// Recorded says, when the hub did not answer, why and which node's
	// record the copies were judged against ("" when the hub answered).
	Recorded string `json:"recorded,omitempty"`
}

func (s NodesStatus) render(w io.Writer) {
	rev := s.Revision
	if s.Commit != "" && s.Commit != s.Revision {
		rev += " (" + s.Commit[:min(12, len(s.Commit))] + ")"
	}
	fmt.Fprintf(w, "\nModel %s: %s@%s\n", s.Address, s.Source, rev)
	if s.Error != "" {
		fmt.Fprintf(w, "  hub       %s\n", s.Error)
	}
	if s.Recorded != "" {
		fmt.Fprintf(w, "  hub       %s\n", s.Recorded)
	}
	for _, n := range s.Nodes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// Status shows every served model's copy on each node, judged as plan
// judges them. Its problems are the plan's (a node without a complete
// copy is a change, a hub refusal an error), which status lists already.
func (Kind) Status(q kind.StatusQuery) []kind.Status {
	var out []kind.Status
	for _, m := range models(q.Config) {
		ns := nodes(q.Config, m)
		r := m.Resolution()
		if len(ns) == 0 || r == nil {
			continue
		}
		st := NodesStatus{Address: address(m), Source: m.Source, Revision: m.Rev, Nodes: []string{}}
		if err := r.Err; err != nil {
			st.Error = err.Error()
		} else {
			mf := r.Manifest
			st.Commit = mf.Commit
			f, _ := q.Config.Facts.(kind.Facts)
			if rec := r.Recorded; rec != nil {
				st.Recorded = fmt.Sprintf("%v; judged against the list recorded on %s at %s", rec.HubErr, rec.Node, rec.RecordedAt.UTC().Format(time.RFC3339))
			}
			st.Nodes = Plan(PlanInput{Model: m, Resolution: &Resolution{Manifest: mf}, Nodes: ns, Addrs: f.FabricAddrs, Nets: netsOf(q.Config),
				Facts: func(n string) *observe.HostFacts { return kind.Usable(q.Facts, n) }}).Change.Reasons
		}
		out = append(out, kind.Status{Address: address(m), Value: st, Render: st.render})
	}
	return out
}
