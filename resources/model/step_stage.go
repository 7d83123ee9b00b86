package model

import (
	"context"
	"fmt"
	"strings"
)

// stageStep copies the model from a node with a complete copy to the
// nodes of its network that lack something, over the fabric, and records
// the manifest on every copy. Stage itself skips what is already there
// and verifies what it writes.
type stageStep struct {
	t    *transfers
	from string
	to   []string
}

// Name names the model, its size and the nodes.
func (s *stageStep) Name() string {
	w := s.t.w
	return fmt.Sprintf("stage %s (%s) from %s to %s over the fabric", w.Manifest.Repo, GB(w.Manifest.Bytes()), s.from, strings.Join(s.to, ", "))
}

// Check always stages: the plan found the copies incomplete.
func (s *stageStep) Check(context.Context) (bool, error) { return false, nil }

// Run stages and records.
func (s *stageStep) Run(ctx context.Context, progress func(string)) error {
	src, err := s.t.peer(s.from)
	if err != nil {
		return err
	}
	if !src.Addr.IsValid() {
		return fmt.Errorf("%s: no fabric address to serve %s from", s.from, s.t.w.Manifest.Repo)
	}
	dsts, err := s.t.peers(s.to)
	if err != nil {
		return err
	}
	if err := Stage(ctx, s.t.w.Manifest, src, dsts, s.t.options(progress)); err != nil {
		return err
	}
	return s.t.w.record(ctx, append([]Peer{src}, dsts...))
}

// Verify has nothing more to read back: Stage verified every file.
func (s *stageStep) Verify(context.Context) error { return nil }
