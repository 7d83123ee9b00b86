package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/transport"
)

// FindLock returns the lock force-unlock breaks for resource arg (its
// address, or its key: the name within the project): the one on the host
// the configuration gives it, else the one the state records for it when
// that names one host. ok is false when neither has one.
func (r *Runner) FindLock(arg string) (t LockTarget, ok bool) {
	var fromState []LockTarget
	for _, t := range lockTargetsOf(r.Kinds, r.Config, r.State) {
		if t.Resource != arg && t.Key != arg {
			continue
		}
		if !t.FromState {
			return t, true
		}
		fromState = append(fromState, t)
	}
	if len(fromState) == 1 {
		return fromState[0], true
	}
	return LockTarget{}, false
}

// LockHolder is what force-unlock finds of a lock.
type LockHolder struct {
	Target LockTarget
	// Name is the lock's name (lock.Name).
	Name string
	// Held is its holder; nil when the lock is free.
	Held *lock.HeldError
	// Legacy is the holder of the name earlier rayform versions used for
	// the lock, where that holder does not say for which deployment (the
	// name can be another's): force-unlock never breaks it. Nil when none
	// or when Held is set.
	Legacy *lock.HeldError
}

// InspectLock reads who holds t's lock on its host.
func (r *Runner) InspectLock(ctx context.Context, t LockTarget) (*LockHolder, error) {
	conn, ok := r.Conns[t.Host]
	if !ok {
		return nil, fmt.Errorf("no SSH settings for host %s", t.Host)
	}
	out := &LockHolder{Target: t, Name: lock.Name(r.Project, t.Key)}
	err := lock.Inspect(ctx, conn, out.Name)
	switch {
	case err == nil:
		// The name earlier versions used is never broken: two deployments
		// can share it ("hb-x" + "spark" and "hb" + "x-spark").
		var held *lock.HeldError
		if lerr := lock.Inspect(ctx, conn, lock.LegacyName(r.Project, t.Key)); errors.As(lerr, &held) && held.Identity == "" {
			out.Legacy = held
		}
		return out, nil
	case !errors.As(err, &out.Held):
		return nil, err
	}
	return out, nil
}

// BreakLock stops the holder of h's lock, so that the lock is free; the
// same run holds the lock under the name earlier versions used too, and
// that one is broken only when its holder record names the same run (the
// client's pid is part of it).
func (r *Runner) BreakLock(ctx context.Context, h *LockHolder) error {
	conn, ok := r.Conns[h.Target.Host]
	if !ok {
		return fmt.Errorf("no SSH settings for host %s", h.Target.Host)
	}
	if err := lock.Break(ctx, conn, h.Name, h.Held.PID); err != nil {
		return err
	}
	legacyName := lock.LegacyName(r.Project, h.Target.Key)
	var legacy *lock.HeldError
	if lerr := lock.Inspect(ctx, conn, legacyName); errors.As(lerr, &legacy) && legacy.Holder == h.Held.Holder && legacy.Identity == h.Name {
		return lock.Break(ctx, conn, legacyName, legacy.PID)
	}
	return nil
}

// EndOrphans takes t's free lock for a moment and advances its fence on
// every host of the run, as a run does: that ends what an earlier run
// (killed, or cut off from a host while sshd still believed its connection
// open) left running under the fence there, telling endedOn what it ended
// where, so that the next run does not wait for it, and refuses any later
// command of that run. Hosts that could not be fenced are the error; the
// next run fences them.
func (r *Runner) EndOrphans(ctx context.Context, t LockTarget, endedOn func(host, name string, gen uint64, ended []lock.Ended)) error {
	conn, ok := r.Conns[t.Host]
	if !ok {
		return fmt.Errorf("no SSH settings for host %s", t.Host)
	}
	name := lock.Name(r.Project, t.Key)
	l, err := lock.Acquire(ctx, conn, name, lock.Options{Holder: Holder("force-unlock"), Identity: name})
	if err != nil {
		return fmt.Errorf("taking the lock of %s to end what an earlier run left running: %w", t.Resource, err)
	}
	defer l.Release()
	locks := &runLocks{lost: make(chan struct{}), fences: map[string][]transport.Fence{}, fenceErr: map[string]error{}}
	r.advanceFences(ctx, endedOn, locks, []string{name})
	var errs []string
	for _, h := range slices.Sorted(maps.Keys(locks.fenceErr)) {
		errs = append(errs, locks.fenceErr[h].Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
