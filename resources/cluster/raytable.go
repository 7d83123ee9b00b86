package cluster

import (
	"fmt"
	"sort"
	"strconv"
)

// rayTableDiff is one way Ray's node table differs from a cluster's
// declaration.
type rayTableDiff struct {
	// Node is the declared node the difference concerns; "" for an ALIVE
	// row under an address no declared node has (IP says which).
	Node string
	IP   string
	// Head is true when only restarting the head (replacing the cluster)
	// can fix it.
	Head bool
	// Attr is the per-node attribute the difference shows in ("address",
	// "gpus"), with the value Ray reports, or "" when none does.
	Attr, Observed string
	Reason         string
}

// judgeRayTable compares Ray's node table with the declared containers
// (head first): every declared node ALIVE exactly once, under its fabric
// address, in its role, with its GPUs, and no other node ALIVE. It is the
// one judgment of the table: plan calls it on the observed table, apply's
// verification on the table it reads after starting the cluster. Specs
// whose address is not known yet are skipped.
func judgeRayTable(specs []ContainerSpec, rows []RayNode) []rayTableDiff {
	byIP := map[string][]RayNode{}
	for _, n := range rows {
		if n.State == "ALIVE" {
			byIP[n.NodeIP] = append(byIP[n.NodeIP], n)
		}
	}
	declared := map[string]bool{}
	for _, s := range specs {
		declared[s.NodeIP] = true
	}
	var diffs []rayTableDiff
	headElsewhere := ""
	for _, s := range specs {
		if s.NodeIP == "" {
			continue
		}
		head := s.Role == "head"
		rs := byIP[s.NodeIP]
		switch {
		case len(rs) == 0 && head:
			// Registered under another address (the c10d failure's cause)?
			for ip, r := range byIP {
				if !declared[ip] && r[0].IsHead {
					headElsewhere = ip
				}
			}
			if headElsewhere != "" {
				diffs = append(diffs, rayTableDiff{Node: s.Node, IP: s.NodeIP, Head: true, Attr: "address", Observed: headElsewhere,
					Reason: fmt.Sprintf("ray head registered as %s; want %s", headElsewhere, s.NodeIP)})
				continue
			}
			fallthrough
		case len(rs) == 0:
			diffs = append(diffs, rayTableDiff{Node: s.Node, IP: s.NodeIP, Head: head,
				Reason: fmt.Sprintf("%s (%s) is not ALIVE in Ray's node table", s.Node, s.NodeIP)})
			continue
		case len(rs) > 1:
			diffs = append(diffs, rayTableDiff{Node: s.Node, IP: s.NodeIP, Head: head,
				Reason: fmt.Sprintf("%s (%s) is ALIVE %d times", s.Node, s.NodeIP, len(rs))})
		}
		n := rs[0]
		if head && !n.IsHead {
			diffs = append(diffs, rayTableDiff{Node: s.Node, IP: s.NodeIP, Head: true,
				Reason: fmt.Sprintf("%s (%s) is ALIVE but not the head", s.Node, s.NodeIP)})
		}
		if !head && n.IsHead {
			diffs = append(diffs, rayTableDiff{Node: s.Node, IP: s.NodeIP,
				Reason: fmt.Sprintf("%s (%s) is ALIVE as a head, want a worker", s.Node, s.NodeIP)})
		}
		if s.GPUs > 0 && n.GPUs() != float64(s.GPUs) {
			diffs = append(diffs, rayTableDiff{Node: s.Node, IP: s.NodeIP, Head: head, Attr: "gpus", Observed: strconv.FormatFloat(n.GPUs(), 'g', -1, 64),
				Reason: fmt.Sprintf("%s (%s) has %g GPUs in Ray, want %d", s.Node, s.NodeIP, n.GPUs(), s.GPUs)})
		}
	}
	var extra []string
	for ip := range byIP {
		if !declared[ip] && ip != headElsewhere {
			extra = append(extra, ip)
		}
	}
	sort.Strings(extra)
	for _, ip := range extra {
		role := "a worker"
		if byIP[ip][0].IsHead {
			role = "the head"
		}
		diffs = append(diffs, rayTableDiff{IP: ip, Reason: fmt.Sprintf("%s is ALIVE as %s but is no declared node's fabric address", ip, role)})
	}
	return diffs
}

// reasons are the diffs' reasons, in order.
func reasons(diffs []rayTableDiff) []string {
	out := make([]string, len(diffs))
	for i, d := range diffs {
		out[i] = d.Reason
	}
	return out
}
