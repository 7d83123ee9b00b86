package main

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

	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
)

// clusterLocks are the cluster locks one apply or destroy holds, and the
// fences it advanced on the hosts under them.
type clusterLocks struct {
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
func (l *clusterLocks) Err() error {
	for _, h := range l.held {
		if err := h.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (l *clusterLocks) release() {
	for _, h := range l.held {
		h.Release()
	}
}

// guard wraps host's connection so that each change first checks that the
// locks are held (on the client) and that the host's fences still hold
// the generations this run advanced them to (on the host, atomically with
// the change: transport.Guard).
func (l *clusterLocks) guard(host string, conn transport.Conn) transport.Conn {
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

// lockTarget is one lock a run takes: a deployment identity's lock on one
// host.
type lockTarget struct {
	cluster string // the ray_cluster's name
	name    string // lock.Name of the identity
	host    string // node name
	// fromState: only the state names this host for the cluster (not the
	// configuration as its head).
	fromState bool
}

// lockTargets lists the locks a run takes: each ray_cluster's lock on its
// head, and, for each ray_cluster the state records, its lock on the head
// it was applied with (every host it was applied to when the state does
// not say which was the head), so that a copy of the configuration with
// another head, or a renamed cluster carrying the same state, waits for a
// run of the original. Sorted by name then host: two runs take common
// locks in one order.
func (s *session) lockTargets() []lockTarget {
	seen := map[[2]string]bool{}
	var out []lockTarget
	fromState := false
	add := func(cluster, host string) {
		t := lockTarget{cluster: cluster, name: lock.Name(s.project, cluster), host: host, fromState: fromState}
		if !seen[[2]string{t.name, host}] {
			seen[[2]string{t.name, host}] = true
			out = append(out, t)
		}
	}
	for name, rc := range s.cfg.RayClusters {
		add(name, rc.Head)
	}
	fromState = true
	for _, addr := range s.st.Addresses() {
		a := plan.ParseAddress(addr)
		if a.Type != "ray_cluster" {
			continue
		}
		r, _ := s.st.Get(addr)
		if r.Head != "" {
			add(a.Instance(), r.Head)
			continue
		}
		for _, h := range r.Hosts {
			add(a.Instance(), h.Node)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].host < out[j].host
	})
	return out
}

// lockClusters takes every lock of lockTargets, each under its name and
// under the name earlier rayform versions used (so that a run of one is
// seen), then advances the fence of each deployment identity on every host
// of the session. A held lock fails at once naming the holder, or after
// -lock-timeout.
func (s *session) lockClusters(ctx context.Context, op string) (*clusterLocks, error) {
	locks := &clusterLocks{lost: make(chan struct{}), fences: map[string][]transport.Fence{}, fenceErr: map[string]error{}}
	if s.opts.noLock {
		return locks, nil
	}
	holder := lockHolder(op)
	fenced := map[string]bool{}
	unlocked := map[string]error{} // hosts whose changes stay refused
	for _, t := range s.lockTargets() {
		conn, ok := s.conns[t.host]
		if !ok {
			continue
		}
		for _, name := range []string{t.name, lock.LegacyName(s.project, t.cluster)} {
			// Every holder record names the identity: a lock of the
			// legacy name that another identity's run holds (the names
			// of two deployments joined by '-' can coincide) is not a
			// conflict, and that run holds its own lock.
			if name != t.name {
				err := lock.Inspect(ctx, conn, name)
				var held *lock.HeldError
				if errors.As(err, &held) && held.Identity != "" && held.Identity != t.name {
					s.c.log.Debug("legacy lock name held by another deployment", "lock", name, "holder", held.Holder, "for", held.Identity)
					continue
				}
			}
			var told bool
			l, err := lock.Acquire(ctx, conn, name, lock.Options{
				Holder:   holder,
				Identity: t.name,
				Wait:     s.opts.lockTimeout,
				Waiting: func(h *lock.HeldError) {
					if !told {
						told = true
						fmt.Fprintf(s.c.stderr, "Waiting up to %s for the lock of ray_cluster.%s: %v\n", s.opts.lockTimeout, t.cluster, h)
					}
				},
				Broke: func(record string) {
					fmt.Fprintf(s.c.stderr, "Warning: broke the stale lock of ray_cluster.%s on %s (its holder %q stopped renewing it for more than %s)\n",
						t.cluster, t.host, record, lock.DefaultLease)
				},
			})
			if err != nil {
				if errors.Is(err, lock.ErrHeld) {
					locks.release()
					return nil, fmt.Errorf("%w\n\nAnother rayform is working on ray_cluster.%s. Wait for it to finish (-lock-timeout=DURATION waits for it); a holder that vanished loses the lock %s after its last renewal. If you are sure it is gone, run rayform force-unlock %s",
						err, t.cluster, lock.DefaultLease, t.cluster)
				}
				if t.fromState {
					// A host only the state names that cannot be reached
					// cannot be changed either: this run goes on without
					// its lock, and its fence refuses any change there.
					fmt.Fprintf(s.c.stderr, "Warning: could not take the lock of ray_cluster.%s on %s, where the state recorded it: %v\n", t.cluster, t.host, err)
					unlocked[t.host] = fmt.Errorf("the lock of ray_cluster.%s could not be taken there: %w", t.cluster, err)
					continue
				}
				locks.release()
				return nil, fmt.Errorf("locking ray_cluster.%s on %s: %w", t.cluster, t.host, err)
			}
			locks.held = append(locks.held, l)
			go func() {
				<-l.Lost()
				locks.once.Do(func() { close(locks.lost) })
			}()
		}
		fenced[t.name] = true
	}
	s.advanceFences(ctx, locks, slices.Sorted(maps.Keys(fenced)))
	for host, err := range unlocked {
		locks.fenceErr[host] = err
	}
	return locks, nil
}

// advanceFences advances the fence of each lock name on every host of the
// session, in parallel. A host that fails keeps the error: its changes are
// refused.
func (s *session) advanceFences(ctx context.Context, locks *clusterLocks, names []string) {
	if len(names) == 0 {
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for host, conn := range s.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var fences []transport.Fence
			var errs []string
			for _, name := range names {
				f, err := lock.AdvanceFence(ctx, conn, name)
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
				s.c.log.Warn("fencing failed", "host", host, "error", locks.fenceErr[host])
			}
		}()
	}
	wg.Wait()
}

// lockHolder describes this process in the lock's holder record: who,
// where, and the command (apply or destroy).
func lockHolder(op string) string {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s pid=%d rayform %s", who, host, os.Getpid(), op)
}
