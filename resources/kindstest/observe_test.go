package kindstest

import (
	"net/netip"
	"testing"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"

	"github.com/rayform/rayform/engine/state"
)

// TestObserveSpecAssumesRecordedFabric: with the fabric addresses apply
// recorded, every peer address is assumed (so routes are checked in the
// first round trip) and every container's wanted spec hash is the one the
// converged container carries (so the probe skips inspecting it); without
// them, nothing is assumed.
func TestObserveSpecAssumesRecordedFabric(t *testing.T) {
	c := convergedCluster(t, 4)
	rc := c.loaded.RayClusters["main"]
	container := cluster.ContainerName(rc)

	st, err := state.New("bench")
	if err != nil {
		t.Fatal(err)
	}
	r := state.Resource{Type: "ray_cluster", Container: container}
	for _, node := range rc.Nodes() {
		r.Hosts = append(r.Hosts, state.Host{Node: node, Host: c.loaded.Nodes[node].Host,
			FabricAddress: c.addrs[node].String(), FabricInterface: "ib0"})
	}
	st.Set(rc.Addr, r)

	spec := ObserveSpec(c.loaded, st, "bench")
	for _, node := range rc.Nodes() {
		hs := spec.Hosts[node]
		var running string
		for _, ct := range c.facts.Hosts[node].Containers.List {
			if ct.Name == container {
				running = ct.SpecHash
			}
		}
		if got := hs.SpecHashes[container]; got == "" || got != running {
			t.Errorf("%s: wanted spec hash %q, the converged container carries %q", node, got, running)
		}
		if len(hs.Peers) != len(rc.Nodes())-1 {
			t.Fatalf("%s: peers %+v", node, hs.Peers)
		}
		for _, p := range hs.Peers {
			if !p.Assumed || p.Addr != c.addrs[p.Host] {
				t.Errorf("%s: peer %+v, want %v assumed", node, p, c.addrs[p.Host])
			}
		}
	}

	// A state from before fabric addresses were recorded assumes nothing.
	old, _ := state.New("bench")
	r.Hosts = nil
	for _, node := range rc.Nodes() {
		r.Hosts = append(r.Hosts, state.Host{Node: node, Host: c.loaded.Nodes[node].Host})
	}
	old.Set(rc.Addr, r)
	for _, s := range []*state.State{old, nil} {
		spec := ObserveSpec(c.loaded, s, "bench")
		for node, hs := range spec.Hosts {
			if len(hs.SpecHashes) != 0 {
				t.Errorf("%s: spec hashes %v without recorded addresses", node, hs.SpecHashes)
			}
			for _, p := range hs.Peers {
				if p.Assumed || p.Addr != (netip.Addr{}) {
					t.Errorf("%s: peer %+v assumed without recorded addresses", node, p)
				}
			}
		}
	}
}

// TestPlanOfContainersKnownFromPS: containers the probe knew to be current
// carry only what docker ps shows (no environment); the plan of the
// converged cluster is still empty, and a container with another spec hash
// is still replaced.
func TestPlanOfContainersKnownFromPS(t *testing.T) {
	c := convergedCluster(t, 3)
	for _, hf := range c.facts.Hosts {
		for i := range hf.Containers.List {
			ct := &hf.Containers.List[i]
			ct.Inspected, ct.Env, ct.Cmd, ct.Entrypoint = false, nil, nil, nil
		}
	}
	addrs, _ := cluster.FabricAddrs(cluster.View(c.loaded.Config), c.facts)
	cfg, diags := c.loaded.WithFacts(Facts{FabricAddrs: addrs})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in := PlanInput{Config: cfg, Facts: c.facts, Project: benchProject}
	checkNoChanges(t, Plan(in).Plan)

	rc := cfg.RayClusters["main"]
	worker := rc.Nodes()[1]
	hf := c.facts.Hosts[worker]
	for i := range hf.Containers.List {
		hf.Containers.List[i].SpecHash = "0000000000000000"
	}
	p := Plan(in).Plan
	if !p.HasChanges() {
		t.Fatalf("a container with another spec hash planned no change")
	}
	for _, ch := range p.Changes {
		if ch.Address == rc.Addr && ch.Action == plan.NoOp {
			t.Errorf("%s: no-op with a stale container on %s", ch.Address, worker)
		}
	}
}
