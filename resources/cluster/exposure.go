package cluster

import (
	"net/netip"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
)

// Exposure is one TCP port of a cluster's node that listens beyond the
// node's loopback and fabric address: who can reach it from another
// network, and whether it demands a key.
type Exposure struct {
	Node string `json:"node"`
	// Addr is the local address as ss prints it ("0.0.0.0:6379").
	Addr      string `json:"addr"`
	Process   string `json:"process,omitempty"`
	Container string `json:"container,omitempty"`
	// Auth says whether the listener demands a key: "ray token" (Ray's
	// token authentication), "api key" (a serve's api_key), "none" (a
	// server of the cluster that answers anyone), or "not rayform's" (a
	// process outside the cluster's container: sshd, dockerd, ...).
	Auth string `json:"auth"`
}

// Exposures reads, from the listeners status asked every node of rc for
// (observe.HostSpec.AllListeners), those bound beyond the node's loopback
// and its fabric address, and judges whether each demands a key: a
// server a block runs in the cluster's container (kind.Listener) by its
// key, the cluster's other listeners (Ray's) by its auth.
func Exposures(cfg *config.Config, facts *observe.Facts, rc *RayCluster) []Exposure {
	out := []Exposure{}
	if facts == nil {
		return out
	}
	fabric, _ := FabricAddrs(View(cfg), facts)
	servers := kind.ListenersOn(cfg, rc.Name)
	for _, node := range rc.Nodes() {
		hf := facts.Hosts[node]
		if hf == nil {
			continue
		}
		for _, l := range hf.Listening.List {
			if !beyondFabric(l.Addr, fabric[node]) {
				continue
			}
			e := Exposure{Node: node, Addr: l.Addr, Process: l.Process, Container: l.Container}
			keyed, isServer := servers[l.Port]
			switch {
			case l.Container != ContainerName(rc):
				e.Auth = "not rayform's"
			case isServer && node == rc.Head && keyed:
				e.Auth = "api key"
			case isServer && node == rc.Head:
				e.Auth = "none"
			case rc.Auth == AuthToken:
				e.Auth = "ray token"
			default:
				e.Auth = "none"
			}
			out = append(out, e)
		}
	}
	return out
}

// beyondFabric reports whether a listener bound to addr (as ss prints
// it) answers beyond the loopback and the fabric address.
func beyondFabric(addr string, fabric netip.Addr) bool {
	host := addr
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		host = addr[:i]
	}
	host = strings.Trim(host, "[]")
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // 127.0.0.53%lo
	}
	if host == "*" {
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return true
	}
	if a.IsUnspecified() {
		return true
	}
	return !a.IsLoopback() && a.Unmap() != fabric
}
