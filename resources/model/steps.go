package model

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/transport"
)

// Steps are apply's steps for w, as its Decision's transfers say: stage
// from each node with a complete copy to the nodes lacking something on
// its network, node to node over the fabric; for each network where no
// node has one, download from the hub onto one node, then stage from it
// to the others of that network. Each reports every
// receiver's progress (bytes, rate, ETA) as a line per node. They change
// nothing that runs (files are written under their final names only once
// verified), so apply runs them before it stops or starts anything: a
// serve keeps serving while its weights are staged, and a failure leaves
// every serve as it was.
func (w *Work) Steps(conns map[string]transport.Conn, opt StageOptions) []apply.Step {
	d := w.Decision
	repo := w.Manifest.Repo
	peer := func(n string) (Peer, error) {
		c := conns[n]
		if c == nil {
			return Peer{}, fmt.Errorf("%s: no connection to stage %s", n, repo)
		}
		return Peer{Name: n, Conn: c, Addr: w.Addrs[n], Layout: w.Layouts[n]}, nil
	}
	peers := func(ns []string) ([]Peer, error) {
		var out []Peer
		for _, n := range ns {
			p, err := peer(n)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	}
	withProgress := func(progress func(string)) StageOptions {
		o := opt
		o.Progress = func(p Progress) { progress(p.String()) }
		return o
	}
	stage := func(from string, to []string) apply.Step {
		return apply.Func{
			Label: fmt.Sprintf("stage %s (%s) from %s to %s over the fabric", repo, GB(w.Manifest.Bytes()), from, strings.Join(to, ", ")),
			RunFunc: func(ctx context.Context, progress func(string)) error {
				src, err := peer(from)
				if err != nil {
					return err
				}
				if !src.Addr.IsValid() {
					return fmt.Errorf("%s: no fabric address to serve %s from", from, repo)
				}
				dsts, err := peers(to)
				if err != nil {
					return err
				}
				if err := Stage(ctx, w.Manifest, src, dsts, withProgress(progress)); err != nil {
					return err
				}
				return w.record(ctx, append([]Peer{src}, dsts...))
			},
		}
	}
	download := func(dl string) apply.Step {
		return apply.Func{
			Label: fmt.Sprintf("download %s@%s (%s) to %s from the hub %s", repo, w.Manifest.Commit[:min(12, len(w.Manifest.Commit))], GB(w.Manifest.Bytes()), dl, w.Model.Endpoint),
			RunFunc: func(ctx context.Context, progress func(string)) error {
				p, err := peer(dl)
				if err != nil {
					return err
				}
				if err := Download(ctx, w.Manifest, p, Hub{Endpoint: w.Model.Endpoint, Token: w.Model.Token}, withProgress(progress)); err != nil {
					return err
				}
				return w.record(ctx, []Peer{p})
			},
		}
	}
	var steps []apply.Step
	for _, t := range d.Transfers() {
		if t.Download {
			steps = append(steps, download(t.From))
		}
		if len(t.To) > 0 {
			steps = append(steps, stage(t.From, t.To))
		}
	}
	return steps
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
