// Ray's resource usage per node, as `ray status` shows it: the parser of
// the dashboard's /api/cluster_status.

package cluster

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/rayform/rayform/engine/observe"
)

// RayUsageURL is where a head's Ray dashboard on dashboardPort answers
// what `ray status` prints: the autoscaler monitor's last report, which
// says per node how much of each resource is used of its total (Ray 2.53
// ray/dashboard/modules/reporter/reporter_head.py get_cluster_status,
// format 0: the monitor's JSON from the GCS's internal KV).
func RayUsageURL(dashboardPort int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/api/cluster_status", dashboardPort)
}

// RayUsageProbe asks the head of rc for Ray's resource usage per node.
// The monitor writes it every AUTOSCALER_UPDATE_INTERVAL_S (5 s), so it
// may lag a placement group created or removed just before.
func RayUsageProbe(rc *RayCluster, project string) observe.HTTPProbe {
	return observe.HTTPProbe{URL: RayUsageURL(rc.DashboardPort), Owner: ContainerName(rc), Bearer: rc.bearerLock(project)}
}

// RayUsage is Ray's report of its nodes' resources: by node IP, by
// resource name, what is used and the total. Ray takes a placement
// group's bundles out of its nodes' available resources when it reserves
// them, so a serve's GPUs show as used for its whole life.
type RayUsage struct {
	ByIP map[string]map[string]UsedTotal `json:"by_ip,omitempty"`
	// Err says why there is no report ("" when ByIP holds one, or when
	// it was not probed: then Probed is false).
	Err    string `json:"err,omitempty"`
	Probed bool   `json:"probed,omitempty"`
}

// UsedTotal is one resource of one node: used of total.
type UsedTotal struct{ Used, Total float64 }

// FreeGPUs is the GPUs of the node at ip that Ray reports available
// (total − used), and whether the report has that node.
func (u RayUsage) FreeGPUs(ip string) (int, bool) {
	r, ok := u.ByIP[ip]
	if !ok {
		return 0, false
	}
	g := r["GPU"]
	return int(math.Floor(g.Total - g.Used + 1e-9)), true
}

// RayUsageOf is Ray's usage report as the head of rc answered it.
func RayUsageOf(hf *observe.HostFacts, rc *RayCluster) RayUsage {
	if hf == nil {
		return RayUsage{}
	}
	r, ok := hf.HTTP[RayUsageURL(rc.DashboardPort)]
	return ParseRayUsage(r, ok)
}

// ParseRayUsage reads the dashboard's answer to GET /api/cluster_status:
// {"result": true, "data": {"clusterStatus": {"loadMetricsReport":
// {"usageByNode": {NODE_ID: {RESOURCE: [used, total]}}}}}}, as Ray 2.53
// answers it (testdata/observe/ray-2.53-cluster-status-tp2.json, read in
// the lab: the key is the node's ID, though the monitor's code calls it
// an IP). The node's IP is its node:IP resource. The dashboard converts
// every key to camel case (dashboard/utils.py to_google_style), resource
// names with underscores included; GPU and node:IP keep theirs.
// clusterStatus is null until the monitor first reported.
func ParseRayUsage(r observe.HTTPResult, ok bool) RayUsage {
	if !ok {
		return RayUsage{}
	}
	u := RayUsage{Probed: true}
	if r.Err != "" {
		u.Err = "dashboard: " + r.Err
		return u
	}
	var env struct {
		Result bool   `json:"result"`
		Msg    string `json:"msg"`
		Data   struct {
			ClusterStatus *struct {
				LoadMetricsReport struct {
					UsageByNode map[string]map[string][]float64 `json:"usageByNode"`
				} `json:"loadMetricsReport"`
			} `json:"clusterStatus"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.Body), &env); err != nil {
		u.Err = "dashboard /api/cluster_status: " + err.Error()
		return u
	}
	switch {
	case !env.Result:
		u.Err = "dashboard /api/cluster_status: " + env.Msg
		return u
	case env.Data.ClusterStatus == nil || env.Data.ClusterStatus.LoadMetricsReport.UsageByNode == nil:
		u.Err = "Ray's monitor has not reported the nodes' usage yet"
		return u
	}
	u.ByIP = map[string]map[string]UsedTotal{}
	for key, res := range env.Data.ClusterStatus.LoadMetricsReport.UsageByNode {
		m := map[string]UsedTotal{}
		ip := ""
		if a, err := netip.ParseAddr(key); err == nil {
			ip = a.String() // an older Ray keyed the report by IP
		}
		for k, v := range res {
			if len(v) != 2 {
				continue
			}
			m[k] = UsedTotal{Used: v[0], Total: v[1]}
			if rest, ok := strings.CutPrefix(k, "node:"); ok && ip == "" {
				if a, err := netip.ParseAddr(rest); err == nil {
					ip = a.String()
				}
			}
		}
		if ip != "" {
			u.ByIP[ip] = m
		}
	}
	return u
}
