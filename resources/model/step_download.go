package model

import (
	"context"
	"fmt"
)

// downloadStep downloads the model from the hub onto one node of a
// network where no node has a copy, and records the manifest there.
type downloadStep struct {
	t    *transfers
	node string
}

// Name names the model, its commit, its size, the node and the hub.
func (s *downloadStep) Name() string {
	m := s.t.w.Manifest
	return fmt.Sprintf("download %s@%s (%s) to %s from the hub %s", m.Repo, m.Commit[:min(12, len(m.Commit))], GB(m.Bytes()), s.node, s.t.w.Model.Endpoint)
}

// Check always downloads: the plan found no copy on the network.
func (s *downloadStep) Check(context.Context) (bool, error) { return false, nil }

// Run downloads and records.
func (s *downloadStep) Run(ctx context.Context, progress func(string)) error {
	p, err := s.t.peer(s.node)
	if err != nil {
		return err
	}
	w := s.t.w
	if err := Download(ctx, w.Manifest, p, Hub{Endpoint: w.Model.Endpoint, Token: w.Model.Token}, s.t.options(progress)); err != nil {
		return err
	}
	return w.record(ctx, []Peer{p})
}

// Verify has nothing more to read back: Download verified every file.
func (s *downloadStep) Verify(context.Context) error { return nil }
