package serve

import (
	"net/netip"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/diagnose"
)

// DiagnoseContext is what the failure classifier needs to know about the
// serve at addr (stepenv.Diagnoser): its cluster's context
// (cluster.DiagnoseContextOf), with the serve's address and memory share.
func (Kind) DiagnoseContext(cfg *config.Config, facts *observe.Facts, addrs map[string]netip.Addr, addr string) diagnose.Context {
	v := View(cfg)
	sv := serveAt(v, addr)
	var rc *cluster.RayCluster
	if sv != nil {
		rc = v.RayClusters[sv.Cluster]
	}
	dc := cluster.DiagnoseContextOf(v.clusters(), facts, addrs, rc)
	if rc != nil {
		dc.Serve = sv.Addr
		dc.GPUMemoryUtilization = sv.GPUMemoryUtilization
	}
	return dc
}
