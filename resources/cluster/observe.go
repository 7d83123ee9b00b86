package cluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/network"
)

// RayTableURL is where a head's Ray dashboard on dashboardPort lists the
// nodes.
func RayTableURL(dashboardPort int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/api/v0/nodes?limit=1000", dashboardPort)
}

// rayTableProbe asks the head for Ray's node table: the dashboard's
// /api/v0/nodes, or, on a host with neither curl nor wget, `ray list
// nodes` (a client of the same API) inside the head container, which
// starts a Python process there and changes nothing.
func rayTableProbe(rc *RayCluster, project string) observe.HTTPProbe {
	return observe.HTTPProbe{URL: RayTableURL(rc.DashboardPort), Owner: ContainerName(rc),
		Fallback: []string{"ray", "list", "nodes", "--format", "json", "--limit", "1000"},
		Bearer:   rc.bearerLock(project)}
}

// RayTable is Ray's node table as the cluster's head answered it.
func RayTable(hf *observe.HostFacts, rc *RayCluster) RayNodeFacts {
	if hf == nil {
		return RayNodeFacts{}
	}
	r, ok := hf.HTTP[RayTableURL(rc.DashboardPort)]
	return ParseRayNodes(r, ok)
}

// AuthModeURL is where a head's dashboard says which authentication its
// Ray runs with (public: Ray 2.52's /api/authentication_mode).
func AuthModeURL(dashboardPort int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/api/authentication_mode", dashboardPort)
}

// What the head's dashboard says of Ray's authentication (RayAuthMode).
const (
	AuthModeToken       = "token"
	AuthModeDisabled    = "disabled"
	AuthModeUnsupported = "unsupported" // no such route: a Ray before 2.52
)

// RayAuthMode is the authentication the head's Ray runs with, as its
// dashboard answered (AuthModeToken, AuthModeDisabled or, for a 404,
// AuthModeUnsupported); "" when it was not asked or not read.
func RayAuthMode(hf *observe.HostFacts, rc *RayCluster) string {
	if hf == nil {
		return ""
	}
	r, ok := hf.HTTP[AuthModeURL(rc.DashboardPort)]
	switch {
	case !ok:
		return ""
	case r.Status == 404:
		return AuthModeUnsupported
	case r.Status != 200:
		return ""
	}
	var v struct {
		Mode string `json:"authentication_mode"`
	}
	if json.Unmarshal([]byte(r.Body), &v) != nil {
		return ""
	}
	switch v.Mode {
	case AuthModeToken, AuthModeDisabled:
		return v.Mode
	}
	return ""
}

// AssumedFabric returns the fabric address (and the interface holding it)
// the state recorded for each node of the configuration's clusters when it
// last applied them: the best guess before the hosts are observed.
func AssumedFabric(cfg *Blocks, st *state.State) (map[string]netip.Addr, map[string]string) {
	addrs := map[string]netip.Addr{}
	ifaces := map[string]string{}
	if st == nil {
		return addrs, ifaces
	}
	for _, rc := range sortedClusters(cfg) {
		r, ok := st.Get(rc.Addr)
		if !ok {
			continue
		}
		for _, h := range r.Hosts {
			a, err := netip.ParseAddr(h.FabricAddress)
			if err != nil || !slices.Contains(rc.Nodes(), h.Node) {
				continue
			}
			addrs[h.Node] = a
			if h.FabricInterface != "" {
				ifaces[h.Node] = h.FabricInterface
			}
		}
	}
	return addrs, ifaces
}

// assumedSpecHashes returns, by node and container name, the spec hash of
// each cluster container if the nodes' fabric addresses are the assumed
// ones; clusters with a node whose address is not assumed are left out.
func assumedSpecHashes(cfg *Blocks, addrs map[string]netip.Addr, ifaces map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	if len(addrs) == 0 {
		return out
	}
	evaluated, diags := cfg.WithFacts(kind.Facts{FabricAddrs: addrs})
	if diags.HasErrors() {
		return out
	}
	for _, rc := range sortedClusters(evaluated) {
		complete := true
		for _, n := range rc.Nodes() {
			if !addrs[n].IsValid() {
				complete = false
			}
		}
		if !complete {
			continue
		}
		for _, s := range ClusterSpecs(evaluated, rc, addrs, ifaces) {
			if out[s.Node] == nil {
				out[s.Node] = map[string]string{}
			}
			out[s.Node][s.Name] = s.Hash()
		}
	}
	return out
}

// Fabric is what the kinds that run on a cluster plan from: the hosts'
// readings (never nil) and each node's fabric address and interface
// (FabricAddrs).
type Fabric struct {
	Facts  *observe.Facts
	Addrs  map[string]netip.Addr
	Ifaces map[string]string
}

// NewFabric reads cfg's nodes' fabric from facts; nil facts read as no
// host answered.
func NewFabric(cfg *Blocks, facts *observe.Facts) Fabric {
	if facts == nil {
		facts = &observe.Facts{Hosts: map[string]*observe.HostFacts{}}
	}
	addrs, ifaces := FabricAddrs(cfg, facts)
	return Fabric{Facts: facts, Addrs: addrs, Ifaces: ifaces}
}

// FabricAddrs reads each cluster node's fabric address from the facts (see
// observe.Fabric.Find), and the interface holding it.
func FabricAddrs(cfg *Blocks, facts *observe.Facts) (map[string]netip.Addr, map[string]string) {
	addrs := map[string]netip.Addr{}
	ifaces := map[string]string{}
	for _, nw := range sortedNetworks(cfg) {
		a, i := nw.Found(facts)
		maps.Copy(addrs, a)
		maps.Copy(ifaces, i)
	}
	// A cluster without a network (a single node) is reached on its
	// default route's address, which is also what Ray detects by itself.
	for _, rc := range sortedClusters(cfg) {
		if rc.Network != "" {
			continue
		}
		if hf := facts.Hosts[rc.Head]; hf != nil && hf.DefaultRoute.Src.IsValid() {
			if _, ok := addrs[rc.Head]; !ok {
				addrs[rc.Head] = hf.DefaultRoute.Src
			}
		}
	}
	return addrs, ifaces
}

// ContainerName is the name of a cluster's container on every node (its
// container_name; the configuration gives it its default).
func ContainerName(rc *RayCluster) string { return rc.ContainerName }

func sortedClusters(cfg *Blocks) []*RayCluster {
	out := make([]*RayCluster, 0, len(cfg.RayClusters))
	for _, k := range slices.Sorted(maps.Keys(cfg.RayClusters)) {
		out = append(out, cfg.RayClusters[k])
	}
	return out
}

func sortedNetworks(cfg *Blocks) []*network.Network {
	out := make([]*network.Network, 0, len(cfg.Networks))
	for _, k := range slices.Sorted(maps.Keys(cfg.Networks)) {
		out = append(out, cfg.Networks[k])
	}
	return out
}

// Fabric is each cluster node's observed fabric address and the
// interface holding it (kind.KindWithFabric, FabricAddrs).
func (Kind) Fabric(req kind.FabricRequest) kind.Fabric {
	addrs, ifaces := FabricAddrs(View(req.Config), req.Hosts)
	return kind.Fabric{Addrs: addrs, Ifaces: ifaces}
}

// HostFacts adds what the clusters' blocks are evaluated with
// (kind.KindWithHostFacts): the nodes' fabric addresses (FabricAddrs),
// the clusters' secret-digest keys (ReadSecretKeys) and bearer tokens
// (ReadBearers).
func (Kind) HostFacts(req kind.HostFactsRequest) {
	f := req.Facts
	f.FabricAddrs, _ = FabricAddrs(View(req.Config), req.Hosts)
	f.SecretKeys = ReadSecretKeys(req.Config, req.Hosts, req.Project)
	f.Bearers = ReadBearers(req.Config, req.Hosts, req.Project)
}
