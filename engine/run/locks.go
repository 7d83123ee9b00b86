package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
)

// LockView is told what taking the locks waits for or works around.
type LockView interface {
	// LockWaiting: the lock of resource is held; the run waits up to
	// Options.LockTimeout for it (told once per lock).
	LockWaiting(resource string, held *lock.HeldError)
	// LockBroken: the stale lock of resource on host (its holder's record)
	// was broken.
	LockBroken(resource, host, record string)
	// LockSkipped: the lock of resource on host, where only the state
	// records it, could not be taken; the host is fenced off.
	LockSkipped(resource, host string, err error)
	// OrphansEnded: fencing lock name on host ended commands an earlier
	// holder of the lock (fence generation gen) still ran there.
	OrphansEnded(host, name string, gen uint64, ended []lock.Ended)
}

// runLocks are the locks one apply or destroy holds, and the fences
// it advanced on the hosts under them.
type runLocks struct {
	held []*lock.Lock
	// lost is closed when any of them is lost.
	lost chan struct{}
	once sync.Once
	// fences are the fences advanced on each host; fenceErr says why a
	// host could not be fenced (its changes are then refused).
	fences   map[string][]transport.Fence
	fenceErr map[string]error
}

// Err is nil while every lock is held, else the first loss's cause.
func (l *runLocks) Err() error {
	for _, h := range l.held {
		if err := h.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (l *runLocks) release() {
	for _, h := range l.held {
		h.Release()
	}
}

// guard wraps host's connection so that each change first checks that the
// locks are held (on the client) and that the host's fences still hold
// the generations this run advanced them to (on the host, atomically with
// the change: transport.Guard).
func (l *runLocks) guard(host string, conn transport.Conn) transport.Conn {
	check := l.Err
	if err := l.fenceErr[host]; err != nil {
		check = func() error {
			if lerr := l.Err(); lerr != nil {
				return lerr
			}
			return fmt.Errorf("the host could not be fenced: %w", err)
		}
	}
	return transport.Guard(conn, check, l.fences[host]...)
}

// lockTarget is one lock a run takes, with its lock name.
type lockTarget struct {
	LockTarget
	name string // lock.Name of the identity
}

// LockNames lists the locks a run takes as "NAME@HOST": the kinds'
// targets (each resource's lock on its head, and on the heads the state
// recorded), deduplicated, sorted by name then host: two runs take common
// locks in one order.
func (r *Runner) LockNames() []string {
	var out []string
	for _, t := range r.lockTargets() {
		out = append(out, t.name+"@"+t.Host)
	}
	return out
}

func (r *Runner) lockTargets() []lockTarget {
	seen := map[[2]string]bool{}
	var out []lockTarget
	for _, t := range lockTargetsOf(r.Kinds, r.Config, r.State) {
		lt := lockTarget{LockTarget: t, name: lock.Name(r.Project, t.Key)}
		if seen[[2]string{lt.name, t.Host}] {
			continue
		}
		seen[[2]string{lt.name, t.Host}] = true
		out = append(out, lt)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].Host < out[j].Host
	})
	return out
}

// takeLocks takes every lock of lockTargets, each under its name and
// under the name earlier rayform versions used (so that a run of one is
// seen), then advances the fence of each deployment identity on every host
// of the run. A held lock fails at once naming the holder, or after
// Options.LockTimeout.
func (r *Runner) takeLocks(ctx context.Context, op string, v LockView) (*runLocks, error) {
	locks := &runLocks{lost: make(chan struct{}), fences: map[string][]transport.Fence{}, fenceErr: map[string]error{}}
	if r.Options.NoLock {
		return locks, nil
	}
	holder := Holder(op)
	fenced := map[string]bool{}
	unlocked := map[string]error{} // hosts whose changes stay refused
	for _, t := range r.lockTargets() {
		conn, ok := r.Conns[t.Host]
		if !ok {
			continue
		}
		for _, name := range []string{t.name, lock.LegacyName(r.Project, t.Key)} {
			// Every holder record names the identity: a lock of the
			// legacy name that another identity's run holds (the names
			// of two deployments joined by '-' can coincide) is not a
			// conflict, and that run holds its own lock.
			if name != t.name {
				err := lock.Inspect(ctx, conn, name)
				var held *lock.HeldError
				if errors.As(err, &held) && held.Identity != "" && held.Identity != t.name {
					r.log().Debug("legacy lock name held by another deployment", "lock", name, "holder", held.Holder, "for", held.Identity)
					continue
				}
			}
			var told bool
			l, err := lock.Acquire(ctx, conn, name, lock.Options{
				Holder:   holder,
				Identity: t.name,
				Wait:     r.Options.LockTimeout,
				Waiting: func(h *lock.HeldError) {
					if !told {
						told = true
						v.LockWaiting(t.Resource, h)
					}
				},
				Broke: func(record string) { v.LockBroken(t.Resource, t.Host, record) },
			})
			if err != nil {
				if errors.Is(err, lock.ErrHeld) {
					locks.release()
					return nil, fmt.Errorf("%w\n\nAnother rayform is working on %s. Wait for it to finish (-lock-timeout=DURATION waits for it); a holder that vanished loses the lock %s after its last renewal. If you are sure it is gone, run rayform force-unlock %s",
						err, t.Resource, lock.DefaultLease, t.Key)
				}
				if t.FromState {
					// A host only the state names that cannot be reached
					// cannot be changed either: this run goes on without
					// its lock, and its fence refuses any change there.
					v.LockSkipped(t.Resource, t.Host, err)
					unlocked[t.Host] = fmt.Errorf("the lock of %s could not be taken there: %w", t.Resource, err)
					continue
				}
				locks.release()
				return nil, fmt.Errorf("locking %s on %s: %w", t.Resource, t.Host, err)
			}
			locks.held = append(locks.held, l)
			go func() {
				<-l.Lost()
				locks.once.Do(func() { close(locks.lost) })
			}()
		}
		fenced[t.name] = true
	}
	r.advanceFences(ctx, v.OrphansEnded, locks, slices.Sorted(maps.Keys(fenced)))
	for host, err := range unlocked {
		locks.fenceErr[host] = err
	}
	return locks, nil
}

// advanceFences advances the fence of each lock name on every host of the
// run, in parallel, telling endedOn (LockView.OrphansEnded) what an earlier
// holder left running that it ended. A host that fails keeps the error:
// its changes are refused.
func (r *Runner) advanceFences(ctx context.Context, endedOn func(host, name string, gen uint64, ended []lock.Ended), locks *runLocks, names []string) {
	if len(names) == 0 {
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for host, conn := range r.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var fences []transport.Fence
			var errs []string
			for _, name := range names {
				f, ended, err := lock.AdvanceFence(ctx, conn, name, r.Options.RotateToken)
				if len(ended) > 0 {
					gen := uint64(0) // unknown
					if err == nil {
						gen = f.Gen - 1
					}
					mu.Lock()
					endedOn(host, name, gen, ended)
					mu.Unlock()
				}
				if err != nil {
					errs = append(errs, err.Error())
					continue
				}
				fences = append(fences, f)
			}
			mu.Lock()
			defer mu.Unlock()
			locks.fences[host] = fences
			if len(errs) > 0 {
				locks.fenceErr[host] = errors.New(strings.Join(errs, "; "))
				r.log().Warn("fencing failed", "host", host, "error", locks.fenceErr[host])
			}
		}()
	}
	wg.Wait()
}

// Holder describes this process in a lock's holder record: who, where,
// and the command (apply or destroy).
func Holder(op string) string {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s pid=%d rayform %s", who, host, os.Getpid(), op)
}

// lockTargetsOf lists the locks of every kind's resources that cfg
// declares or st remembers (kind.KindWithLocks), the configuration's
// first: of two targets of one lock and host, the first is kept.
func lockTargetsOf(kinds kind.Registry, cfg *config.Config, st *state.State) []LockTarget {
	var out []LockTarget
	for _, k := range kind.With[kind.KindWithLocks](kinds) {
		out = append(out, k.Locks(kind.LocksRequest{Config: cfg, State: st})...)
	}
	return out
}
