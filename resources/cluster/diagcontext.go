package cluster

import (
	"net/netip"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/diagnose"
)

// DiagnoseContext is what the failure classifier needs to know about the
// resource at addr (stepenv.Diagnoser): its cluster's
// (DiagnoseContextOf).
func (Kind) DiagnoseContext(cfg *config.Config, facts *observe.Facts, addrs map[string]netip.Addr, addr string) diagnose.Context {
	v := View(cfg)
	return DiagnoseContextOf(v, facts, addrs, At(v, addr))
}

// DiagnoseContextOf is what the failure classifier needs to know about
// the cluster rc behind a resource (a ray_cluster, or the vllm_serve on
// it): the declared fabric, each node's fabric and management addresses,
// and the settings that decide the memory monitor's verdict. A nil rc
// has an empty context.
func DiagnoseContextOf(cfg *Blocks, facts *observe.Facts, addrs map[string]netip.Addr, rc *RayCluster) diagnose.Context {
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
	return dc
}
