package model

import (
	"fmt"

	"github.com/rayform/rayform/engine/observe"
)

// NodeCopy is what plan knows of one node's copy of a model: where it
// lies and the tree probe's listing of that directory.
type NodeCopy struct {
	Node   string
	Layout Layout
	Tree   observe.TreeFacts
}

// Decision is plan's judgment of a model across the nodes that need it,
// and how apply would stage it.
type Decision struct {
	// Judgments are the nodes' copies, in the order given.
	Judgments []NodeJudgment
	// Source is the node whose complete copy the others receive over the
	// fabric; "" when no node has one.
	Source string
	// Download is the node that downloads from the hub when no node has a
	// complete copy (the one holding the most of it, then the first):
	// the others then receive from it over the fabric, which is faster
	// than each downloading from the hub.
	Download string
	// Receivers are the nodes that lack something, in the order given
	// (Download among them).
	Receivers []string
	// Errors are the problems that stop apply before anything runs: a
	// node without the disk space staging needs.
	Errors []string
}

// NodeJudgment is one node's judgment.
type NodeJudgment struct {
	Node string
	Judgment
}

// Decide judges every node's copy of m and picks how to stage: from the
// first node with a complete copy (pass the cluster's head first to
// prefer it), else by one download from the hub.
func Decide(m Manifest, nodes []NodeCopy) Decision {
	var d Decision
	most := int64(-1)
	for _, n := range nodes {
		j := Judge(m, n.Layout, n.Tree)
		d.Judgments = append(d.Judgments, NodeJudgment{Node: n.Node, Judgment: j})
		if j.State == Complete {
			if d.Source == "" {
				d.Source = n.Node
			}
			continue
		}
		d.Receivers = append(d.Receivers, n.Node)
		if msg := j.DiskError(n.Layout.Dir); msg != "" {
			d.Errors = append(d.Errors, n.Node+": "+msg)
		}
		if have := m.Bytes() - j.NeedBytes; have > most {
			most, d.Download = have, n.Node
		}
	}
	if d.Source != "" || len(d.Receivers) == 0 {
		d.Download = ""
	}
	return d
}

// Lines are plan's line per node: "spark1: complete", "spark2: absent,
// 1.1 GB to stage from spark1 over the fabric", "spark1: absent, 1.1 GB
// to download from the hub".
func (d Decision) Lines() []string {
	var out []string
	for _, j := range d.Judgments {
		s := j.Node + ": " + j.Judgment.String()
		switch {
		case j.State == Complete:
		case d.Source != "":
			s += " from " + d.Source + " over the fabric"
		case j.Node == d.Download:
			s += ", downloaded from the hub"
		case d.Download != "":
			s += " from " + d.Download + " over the fabric, once it has downloaded it"
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
