package serve

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/stepenv"
)

// serveCheck returns the ranks of the check that runs before a serve on
// rc starts: CheckNodes, or nil when dataplane_check = false or the
// cluster has no workers (nothing crosses the fabric).
func serveCheck(cfg *Blocks, rc *cluster.RayCluster, addrs map[string]netip.Addr, ifaces map[string]string) []dataplane.Node {
	if rc == nil || !rc.DataplaneCheck || len(rc.Workers) == 0 {
		return nil
	}
	return CheckNodes(cfg, rc, addrs, ifaces)
}

// CheckNodes returns the ranks of cluster rc's data-plane check, head first:
// each node's Ray container and the fabric address and interface rayform
// pinned there.
func CheckNodes(cfg *Blocks, rc *cluster.RayCluster, addrs map[string]netip.Addr, ifaces map[string]string) []dataplane.Node {
	nw := cfg.Networks[rc.Network]
	var nodes []dataplane.Node
	for _, s := range cluster.ClusterSpecs(cluster.View(cfg.Config), rc, addrs, ifaces) {
		iface := ifaces[s.Node]
		if nw != nil && nw.InterfaceFor(s.Node) != "" {
			iface = nw.InterfaceFor(s.Node)
		}
		nodes = append(nodes, dataplane.Node{Name: s.Node, Container: s.Name, Addr: addrs[s.Node], Iface: iface})
	}
	if len(nodes) > 0 {
		nodes[0].Busy = []int{rc.Port, rc.DashboardPort}
		for _, sv := range cfg.Serves {
			if sv.Cluster == rc.Name {
				nodes[0].Busy = append(nodes[0].Busy, sv.Port)
			}
		}
		sort.Ints(nodes[0].Busy)
	}
	return nodes
}

// CheckError is the failure of a data-plane check: what failed on which
// node, then the classified cause read from every rank's output (torch's
// and the backends' own lines). A failure no log rule explains (a backend
// on another address than the node's fabric address) gets its own cause.
func CheckError(rep *dataplane.Report, dctx diagnose.Context, consequence string) error {
	var lines []string
	var moved []dataplane.Problem
	for _, p := range rep.Problems() {
		if !p.Warning {
			lines = append(lines, "  "+p.Text)
			if p.Backend != "" {
				moved = append(moved, p)
			}
		}
	}
	err := fmt.Errorf("data-plane check failed (rendezvous %s:%d); %s:\n%s", rep.Master, rep.Port, consequence, strings.Join(lines, "\n"))
	d := diagnose.Classify(diagnose.Input{Logs: rep.Logs(), Context: dctx})
	if d.Generic() {
		for _, l := range lines {
			if strings.Contains(l, "the image has no python3") || strings.Contains(l, "No module named 'torch'") {
				cluster := dctx.Cluster
				if cluster == "" {
					cluster = "the ray_cluster"
				}
				return &stepenv.DiagnosedError{Err: err, Diagnosis: diagnose.Diagnosis{
					Cause:       "dataplane-no-torch",
					Title:       "the image has no python3 with torch: the data-plane check cannot run",
					Evidence:    []diagnose.Evidence{{Source: dataplane.Source + " report", Line: strings.TrimSpace(l), LineNo: 1}},
					Explanation: "The check runs torch.distributed inside each node's Ray container, under the image's own Python; vLLM images have both.",
					Fix:         "Use an image with Python and torch, or set dataplane_check = false on " + cluster + " to skip the check.",
				}}
			}
		}
	}
	if d.Generic() && len(moved) > 0 {
		p := moved[0]
		d = diagnose.Diagnosis{
			Cause:       "dataplane-address",
			Title:       "the data plane on " + p.Node + " does not use the node's fabric address",
			Evidence:    []diagnose.Evidence{{Host: p.Node, Source: dataplane.Source + " report", Line: p.Text, LineNo: 1}},
			Explanation: "Ray and vLLM were given the address rayform observed on the fabric (VLLM_HOST_IP, --node-ip-address), but the collectives' connections on " + p.Node + " leave from another one: the address moved (DHCP, a re-plugged link) or the interface now holds a different one since the containers started.",
			Fix:         "Run rayform plan: it shows the new address, and apply recreates the node's Ray container with it. If the address should not have changed, restore it on " + p.Node + " (ip addr) and re-run apply.",
		}
	}
	return &stepenv.DiagnosedError{Err: err, Diagnosis: d}
}
