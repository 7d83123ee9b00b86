package resources

import (
	"net/netip"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/diagnose"
)

// DiagnoseContext is what the failure classifier needs to know about the
// cluster behind a resource (a ray_cluster or a vllm_serve): the declared
// fabric, each node's fabric and management addresses, and the settings
// that decide the memory monitor's verdict.
func DiagnoseContext(cfg *Config, facts *observe.Facts, addrs map[string]netip.Addr, w *Work) diagnose.Context {
	rc := cluster.At(cluster.View(cfg.Config), w.Address)
	sv := serveAt(cfg, w.Address)
	if sv != nil {
		rc = cfg.RayClusters[sv.Cluster]
	}
	dc := diagnose.Context{NodeAddrs: map[string]string{}, MgmtAddrs: map[string]string{}}
	if rc == nil {
		return dc
	}
	dc.Cluster = rc.Addr
	dc.HeadNode = rc.Head
	dc.RayPort = rc.Port
	dc.MemoryMonitorOn = rc.MemoryMonitor
	dc.Image = rc.Image
	if nw := cfg.Networks[rc.Network]; nw != nil {
		dc.Network = nw.Addr
		dc.FabricCIDR = nw.CIDR
		dc.FabricInterface = nw.InterfaceFor(rc.Head)
	}
	for _, node := range rc.Nodes() {
		if a, ok := addrs[node]; ok {
			dc.NodeAddrs[node] = a.String()
		}
		if hf := facts.Hosts[node]; hf != nil {
			if hf.DefaultRoute.Src.IsValid() {
				dc.MgmtAddrs[node] = hf.DefaultRoute.Src.String()
			}
			dc.UnifiedMemory = dc.UnifiedMemory || hf.UnifiedMemory
		}
	}
	if sv != nil {
		dc.Serve = sv.Addr
		dc.GPUMemoryUtilization = sv.GPUMemoryUtilization
	}
	return dc
}
