package resources

import (
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/kind"
	"github.com/rayform/rayform/resources/kit"
)

// ObserveSpec says what to observe on every host the configuration (and the
// state, for resources removed from it) names: one probe per host.
//
// The state's record of each node's fabric address (see cluster.AssumedFabric)
// makes a converged cluster cheap to observe: peers' routes are checked in
// the first round trip against the recorded addresses (observe verifies
// them against the peers' own facts), and each container's spec hash under
// those addresses is given to the probe, which then skips `docker inspect`
// of a container that runs with that hash and the image inspection of a
// host whose containers all do.
func ObserveSpec(cfg *Config, st *state.State, project string) observe.Spec {
	return observeSpec(cfg, st, project, false)
}

// observeSpec is ObserveSpec, with what status shows when status is set
// (kind.Observation.Status).
func observeSpec(cfg *Config, st *state.State, project string, status bool) observe.Spec {
	spec := observe.Spec{Hosts: map[string]observe.HostSpec{}}
	for name := range cfg.Nodes {
		spec.Hosts[name] = observe.HostSpec{Project: project}
	}
	o := &kind.Observation{Config: cfg.Config, State: st, Project: project, Spec: &spec, Status: status}
	for _, k := range KindsWith[kind.WithObserve]() {
		k.Observe(o)
	}
	// Hosts of resources that left the configuration: look for their
	// containers (their kinds ask for the rest) so they can be destroyed.
	if st != nil {
		for _, addr := range st.Addresses() {
			r, _ := st.Get(addr)
			if kind.Declared(cfg.Config, addr) {
				// Still configured: look at hosts it no longer names too
				// (a removed worker), to find what must be stopped there.
				for _, h := range r.Hosts {
					if _, ok := spec.Hosts[h.Node]; !ok {
						spec.Hosts[h.Node] = observe.HostSpec{Project: project, Containers: []string{r.Container}}
					}
				}
				continue
			}
			for _, h := range r.Hosts {
				hs := o.Host(h.Node)
				if r.Container != "" {
					hs.Containers = kit.AppendUnique(hs.Containers, r.Container)
				}
				o.SetHost(h.Node, hs)
			}
		}
	}
	// The containers' variables whose values the plan reads; every other
	// value is redacted on the host.
	for node, hs := range spec.Hosts {
		hs.EnvKeys = kit.EnvKeys()
		spec.Hosts[node] = hs
	}
	return spec
}

// The probes a cluster and its serves ask of the head, and the one reading
// of each answer: plan and status both read them here.
