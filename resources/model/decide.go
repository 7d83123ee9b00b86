package model

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/rayform/rayform/engine/observe"
)

// NodeCopy is what plan knows of one node's copy of a model: where it
// lies, the tree probe's listing of that directory, and where the node is
// on the fabric.
type NodeCopy struct {
	Node   string
	Layout Layout
	Tree   observe.TreeFacts
	// Net is the name of the network of the node's cluster, Subnet its
	// subnet ("" and invalid for a node whose cluster declares none), and
	// Addr the node's fabric address (invalid when unknown). A node
	// receives only from a node whose fabric address is in its network's
	// subnet; nodes without a network are taken to reach each other.
	Net    string
	Subnet netip.Prefix
	Addr   netip.Addr
}

// reaches reports whether dst can receive from src over dst's network.
func (dst NodeCopy) reaches(src NodeCopy) bool {
	if !dst.Subnet.IsValid() {
		return !src.Subnet.IsValid()
	}
	return src.Addr.IsValid() && dst.Subnet.Contains(src.Addr)
}

// group is the key of dst's network: the receivers of one network that
// lack a complete copy download it once, and receive from that node.
func (dst NodeCopy) group() string {
	if !dst.Subnet.IsValid() {
		return ""
	}
	return dst.Subnet.Masked().String()
}

// Decision is plan's judgment of a model across the nodes that need it,
// and how apply would stage it.
type Decision struct {
	// Judgments are the nodes' copies, in the order given.
	Judgments []NodeJudgment
	// From maps each receiver that gets the model over the fabric to the
	// node it receives from: the first node with a complete copy whose
	// fabric address is in the receiver's network's subnet, else the
	// node of its network that downloads it.
	From map[string]string
	// Downloads are the nodes that download from the hub, one per network
	// where no node has a complete copy (the one holding the most of it,
	// then the first): the others of that network receive from it over
	// the fabric, which is faster than each downloading from the hub.
	Downloads []string
	// Receivers are the nodes that lack something, in the order given
	// (the downloaders among them).
	Receivers []string
	// Errors are the problems that stop apply before anything runs: a
	// node without the disk space staging needs.
	Errors []string
	// nets is how many networks the nodes are on: the lines name the
	// network only when there is more than one.
	nets int
}

// NodeJudgment is one node's judgment.
type NodeJudgment struct {
	Node string
	Judgment
	// Net is the node's network's name.
	Net string
}

// Complete reports whether some node has a complete copy.
func (d Decision) Complete() bool {
	return slices.ContainsFunc(d.Judgments, func(j NodeJudgment) bool { return j.State == Complete })
}

// Transfer is one staging from a node to others over the fabric.
type Transfer struct {
	From string
	To   []string
	// Download says From downloads it from the hub first.
	Download bool
}

// Transfers are the stagings of d: from each node with a complete copy
// to the receivers it serves, in the order of the nodes; then, for each
// downloader, its download and its staging to the receivers of its
// network.
func (d Decision) Transfers() []Transfer {
	var out []Transfer
	add := func(from string, download bool) {
		t := Transfer{From: from, Download: download}
		for _, r := range d.Receivers {
			if d.From[r] == from {
				t.To = append(t.To, r)
			}
		}
		if download || len(t.To) > 0 {
			out = append(out, t)
		}
	}
	for _, j := range d.Judgments {
		if j.State == Complete {
			add(j.Node, false)
		}
	}
	for _, n := range d.Downloads {
		add(n, true)
	}
	return out
}

// Decide judges every node's copy of m and picks how to stage: each
// receiver from the first node with a complete copy that it reaches over
// its network (pass a cluster's head first to prefer it); a network
// without one by one download from the hub, the rest of it receiving from
// that node.
func Decide(m Manifest, nodes []NodeCopy) Decision {
	d := Decision{From: map[string]string{}}
	judged := make([]Judgment, len(nodes))
	nets := map[string]bool{}
	for i, n := range nodes {
		j := Judge(m, n.Layout, n.Tree)
		judged[i] = j
		nets[n.group()] = true
		d.Judgments = append(d.Judgments, NodeJudgment{Node: n.Node, Judgment: j, Net: n.Net})
		if j.State == Complete {
			continue
		}
		d.Receivers = append(d.Receivers, n.Node)
		if msg := j.DiskError(n.Layout.Dir); msg != "" {
			d.Errors = append(d.Errors, n.Node+": "+msg)
		}
	}
	d.nets = len(nets)
	// Each network without a complete copy its receivers reach: the
	// receiver holding the most downloads, the others receive from it.
	download := map[string]int{} // network → index of its downloader
	for i, dst := range nodes {
		if judged[i].State == Complete {
			continue
		}
		if src := reachable(nodes, judged, dst); src != "" {
			d.From[dst.Node] = src
			continue
		}
		g := dst.group()
		if k, ok := download[g]; !ok || m.Bytes()-judged[i].NeedBytes > m.Bytes()-judged[k].NeedBytes {
			download[g] = i
		}
	}
	for i, dst := range nodes {
		k, ok := download[dst.group()]
		if !ok || judged[i].State == Complete || d.From[dst.Node] != "" {
			continue
		}
		if k == i {
			d.Downloads = append(d.Downloads, dst.Node)
		} else {
			d.From[dst.Node] = nodes[k].Node
		}
	}
	return d
}

// reachable is the first node of nodes with a complete copy (judged)
// that dst reaches over its network, "" when none.
func reachable(nodes []NodeCopy, judged []Judgment, dst NodeCopy) string {
	for i, s := range nodes {
		if judged[i].State == Complete && dst.reaches(s) {
			return s.Node
		}
	}
	return ""
}

// Lines are plan's line per node: "spark1: complete", "spark2: absent,
// 1.1 GB to stage from spark1 over the fabric", "spark1: absent, 1.1 GB
// to stage, downloaded from the hub"; with nodes on several networks,
// "over network NAME".
func (d Decision) Lines() []string {
	var out []string
	for _, j := range d.Judgments {
		s := j.Node + ": " + j.Judgment.String()
		over := " over the fabric"
		if d.nets > 1 {
			over = " over network " + j.Net
		}
		from := d.From[j.Node]
		switch {
		case j.State == Complete:
		case slices.Contains(d.Downloads, j.Node):
			s += ", downloaded from the hub"
		case slices.Contains(d.Downloads, from):
			s += " from " + from + over + ", once it has downloaded it"
		case from != "":
			s += " from " + from + over
		}
		if j.FreeBytes >= 0 && j.State != Complete {
			s += fmt.Sprintf(" (%s free)", GB(j.FreeBytes))
		}
		if j.Err != "" {
			s += "; listing incomplete: " + j.Err
		}
		out = append(out, s)
	}
	return out
}
