package model

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/transport"
)

// Steps are apply's steps for w, as its Decision's transfers say: stage
// from each node with a complete copy to the nodes lacking something on
// its network, node to node over the fabric (stageStep); for each network
// where no node has one, download from the hub onto one node
// (downloadStep), then stage from it to the others of that network. Each
// reports every receiver's progress (bytes, rate, ETA) as a line per
// node. They change nothing that runs (files are written under their final
// names only once verified), so apply runs them before it stops or starts
// anything: a serve keeps serving while its weights are staged, and a
// failure leaves every serve as it was.
func (w *Work) Steps(conns map[string]transport.Conn, opt StageOptions) []apply.Step {
	t := &transfers{w: w, conns: conns, opt: opt}
	var steps []apply.Step
	for _, tr := range w.Decision.Transfers() {
		if tr.Download {
			steps = append(steps, &downloadStep{t: t, node: tr.From})
		}
		if len(tr.To) > 0 {
			steps = append(steps, &stageStep{t: t, from: tr.From, to: tr.To})
		}
	}
	return steps
}

// transfers is what the steps of one model's work share, read-only: the
// work, the connections to its nodes and the transfers' options.
type transfers struct {
	w     *Work
	conns map[string]transport.Conn
	opt   StageOptions
}

// peer is node as a transfer's end.
func (t *transfers) peer(node string) (Peer, error) {
	c := t.conns[node]
	if c == nil {
		return Peer{}, fmt.Errorf("%s: no connection to stage %s", node, t.w.Manifest.Repo)
	}
	return Peer{Name: node, Conn: c, Addr: t.w.Addrs[node], Layout: t.w.Layouts[node]}, nil
}

// peers are nodes as a transfer's ends.
func (t *transfers) peers(nodes []string) ([]Peer, error) {
	var out []Peer
	for _, n := range nodes {
		p, err := t.peer(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// options are the transfers' options reporting to a step's progress.
func (t *transfers) options(progress func(string)) StageOptions {
	o := t.opt
	o.Progress = func(p Progress) { progress(p.String()) }
	return o
}

// record writes the manifest on each of peers, whose copies are verified
// complete (WriteRecord): what a plan judges them against when the hub
// does not answer.
func (w *Work) record(ctx context.Context, peers []Peer) error {
	r := Record{Manifest: w.Manifest, Endpoint: w.Model.Endpoint, RecordedAt: time.Now()}
	var errs []error
	for _, p := range peers {
		if err := WriteRecord(ctx, p.Conn, p.Layout.Dir, r); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}
