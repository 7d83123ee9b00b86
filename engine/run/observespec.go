package run

import (
	"slices"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/state"
)

// ObserveSpec says what to observe on every host the configuration (and the
// state, for resources removed from it) names: one probe per host.
//
// The state's record of each node's fabric address (the kinds' KindWithFabric)
// makes a converged cluster cheap to observe: peers' routes are checked in
// the first round trip against the recorded addresses (observe verifies
// them against the peers' own facts), and each container's spec hash under
// those addresses is given to the probe, which then skips `docker inspect`
// of a container that runs with that hash and the image inspection of a
// host whose containers all do. status adds what status shows (kind.Observation.Status).
func ObserveSpec(kinds kind.Registry, cfg *config.Config, st *state.State, project string, status bool) observe.Spec {
	spec := observe.Spec{Hosts: map[string]observe.HostSpec{}}
	for _, h := range Hosts(kinds, cfg) {
		spec.Hosts[h.Name] = observe.HostSpec{Project: project}
	}
	o := &kind.Observation{Config: cfg, State: st, Project: project, Spec: &spec, Status: status}
	for _, k := range kind.With[kind.KindWithObserve](kinds) {
		k.Observe(o)
	}
	// Hosts of resources that left the configuration: look for their
	// containers (their kinds ask for the rest) so they can be destroyed.
	if st != nil {
		for _, addr := range st.Addresses() {
			r, _ := st.Get(addr)
			if kind.Declared(cfg, addr) {
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
					hs.Containers = appendUnique(hs.Containers, r.Container)
				}
				o.SetHost(h.Node, hs)
			}
		}
	}
	// The containers' variables whose values the plan reads (the
	// kinds'); every other value is redacted on the host.
	for node, hs := range spec.Hosts {
		hs.EnvKeys = o.EnvKeys
		spec.Hosts[node] = hs
	}
	return spec
}

// The probes a cluster and its serves ask of the head, and the one reading
// of each answer: plan and status both read them here.

// Hosts lists the hosts cfg declares (kind.KindWithHosts), by name.
func Hosts(kinds kind.Registry, cfg *config.Config) []kind.Host {
	var out []kind.Host
	for _, k := range kind.With[kind.KindWithHosts](kinds) {
		out = append(out, k.Hosts(cfg)...)
	}
	return out
}

// hostOf is node as cfg declares it (false when it does not).
func hostOf(kinds kind.Registry, cfg *config.Config, node string) (kind.Host, bool) {
	for _, h := range Hosts(kinds, cfg) {
		if h.Name == node {
			return h, true
		}
	}
	return kind.Host{}, false
}

// appendUnique appends s to list unless it holds it already (or is "").
func appendUnique(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
