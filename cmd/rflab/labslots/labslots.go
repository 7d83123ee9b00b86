// Package labslots lets a test process run its lab tests side by side
// while keeping at most a fixed number of labs up at once, the heaviest
// labs first.
//
// A lab test mostly waits (on sshd, dockerd, Ray), so lab tests are
// parallel tests; what limits them is the machine's memory and CPU, not
// go test's -parallel (which defaults to the number of CPUs and counts a
// test whose parallel subtests run as not running). A package's TestMain
// calls Main (or Setup) with its default; its lab helper joins the queue
// (Join) before it calls t.Parallel, builds what every lab needs, opens
// the pool (Open) and waits for its turn (Ticket.Wait) before bringing its
// lab up. go test resumes the parallel tests only once every top-level
// test has run up to its t.Parallel, so every lab test of the run is
// queued before the first slot is granted, and the slots go to the
// heaviest labs first (the longest tests start first, and the run ends
// soonest) rather than to whichever goroutine came first.
// RAYFORM_E2E_LABS overrides the default of every package (1 runs the
// labs one after another).
package labslots

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
)

// Env names the variable that overrides a package's default.
const Env = "RAYFORM_E2E_LABS"

// maxParallel is the -parallel Setup gives go test: more than any package
// has lab tests, so that every one of them is running (and queued here)
// when the pool opens.
const maxParallel = 256

// Pool hands out a fixed number of slots, one per lab that is up, of
// which at most about half go to heavy labs (a CPU-bound lab, like one
// running the real Ray: more of them at once than the machine has cores
// only slows each, until their own timeouts fire).
type Pool struct {
	mu        sync.Mutex
	changed   *sync.Cond
	free      int
	heavyFree int
	size      int
	open      bool
	seq       int
	waiting   map[*Ticket]bool
}

// Ticket is a test's place in the queue and, once granted, its slot.
type Ticket struct {
	p       *Pool
	weight  int
	heavy   bool
	share   bool // takes the pool's whole heavy share (JoinHeavyShare)
	seq     int
	granted bool
}

// New makes a pool of n slots, (n+1)/2 of them for heavy labs, closed
// until Open.
func New(n int) *Pool {
	p := &Pool{free: n, heavyFree: heavyShare(n), size: n, waiting: map[*Ticket]bool{}}
	p.changed = sync.NewCond(&p.mu)
	return p
}

// heavyShare is how many of n slots heavy labs may hold at once.
func heavyShare(n int) int { return (n + 1) / 2 }

// Setup makes the pool of a test process from RAYFORM_E2E_LABS, or def
// when it is empty, and raises go test's -parallel (unless the command
// line gave it) so that the pool, not -parallel, limits the labs.
// TestMain calls it after flag.Parse and before m.Run.
func Setup(def int) (*Pool, error) {
	n, err := Slots(os.Getenv(Env), def)
	if err != nil {
		return nil, err
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(maxParallel)); err != nil {
			return nil, fmt.Errorf("raise -parallel: %w", err)
		}
	}
	return New(n), nil
}

// Main is a lab test package's TestMain after its own first steps: it
// parses the flags, sets *pool up (Setup with def; a bad RAYFORM_E2E_LABS
// exits 2), runs the tests, runs cleanup (may be nil) and exits with the
// tests' code.
func Main(m *testing.M, def int, pool **Pool, cleanup func()) {
	flag.Parse()
	p, err := Setup(def)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	*pool = p
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	os.Exit(code)
}

// Slots reads a RAYFORM_E2E_LABS value: empty for def, else a count >= 1.
func Slots(env string, def int) (int, error) {
	if env == "" {
		return def, nil
	}
	n, err := strconv.Atoi(env)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a count of labs, 1 or more", Env, env)
	}
	return n, nil
}

// Size is how many labs the pool lets up at once.
func (p *Pool) Size() int { return p.size }

// Join queues the test with its lab's weight (a heavier lab is granted
// first; equal weights in the order they joined) and whether the lab is
// heavy (counted against the heavy labs' share too; while that is used up,
// lighter labs behind a heavy one go first). The test's cleanup gives the
// slot back, or leaves the queue: call Join before registering the cleanup
// that takes the lab down (cleanups run last first), so that the slot is
// free only once the lab is down.
func (p *Pool) Join(t testing.TB, weight int, heavy bool) *Ticket {
	t.Helper()
	return p.join(t, &Ticket{p: p, weight: weight, heavy: heavy})
}

// JoinHeavyShare queues a test whose lab alone loads the machine as much
// as the pool's heavy labs together (like the real vLLM's): it is granted
// the pool's whole heavy share — every heavy slot, and as many slots of
// the pool — once no heavy lab is up, so that only light labs run beside
// it (a pool of 1 or 2 slots: it runs alone, or beside one light lab).
// While it is the next to go only light labs start, and only in the slots
// beyond its share, so that it is not starved by lighter labs that each
// find a free slot. Its slots come back as Join's.
func (p *Pool) JoinHeavyShare(t testing.TB, weight int) *Ticket {
	t.Helper()
	return p.join(t, &Ticket{p: p, weight: weight, heavy: true, share: true})
}

func (p *Pool) join(t testing.TB, tk *Ticket) *Ticket {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	tk.seq = p.seq
	p.waiting[tk] = true
	t.Cleanup(tk.done)
	return tk
}

// Open starts granting slots (idempotent).
func (p *Pool) Open() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = true
	p.changed.Broadcast()
}

// Wait blocks until the ticket holds a slot: the pool is open, a slot (a
// heavy one, for a heavy lab) is free and no waiting ticket that could
// take it comes before it.
func (tk *Ticket) Wait() {
	p := tk.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.grant(tk) {
		p.changed.Wait()
	}
}

// grant gives tk a slot if it is its turn, and reports whether tk holds
// one. The caller holds p.mu.
func (p *Pool) grant(tk *Ticket) bool {
	if !tk.granted && p.open && p.next() == tk {
		switch {
		case tk.share:
			p.free -= heavyShare(p.size)
			p.heavyFree = 0
		case tk.heavy:
			p.free--
			p.heavyFree--
		default:
			p.free--
		}
		tk.granted = true
		delete(p.waiting, tk)
		p.changed.Broadcast()
	}
	return tk.granted
}

// next is the waiting ticket to grant next: of those a free slot fits,
// the heaviest, then the first to join; nil if none fits. A heavy-share
// ticket fits only a pool with no heavy lab up and the share's slots free;
// while one comes first of all that wait and does not fit, only a light
// lab that leaves it the share's slots free may go before it (none that
// would delay it). The caller holds p.mu.
func (p *Pool) next() *Ticket {
	var first *Ticket
	for tk := range p.waiting {
		if first == nil || ahead(tk, first) {
			first = tk
		}
	}
	blocked := first != nil && first.share && !p.fits(first)
	var best *Ticket
	for tk := range p.waiting {
		ok := p.fits(tk)
		if blocked {
			ok = ok && !tk.heavy && p.free-1 >= heavyShare(p.size)
		}
		if ok && (best == nil || ahead(tk, best)) {
			best = tk
		}
	}
	return best
}

// fits reports whether the free slots fit tk: one slot (and a heavy one,
// for a heavy lab), or for a heavy-share ticket every heavy slot and as
// many slots. The caller holds p.mu.
func (p *Pool) fits(tk *Ticket) bool {
	if tk.share {
		hs := heavyShare(p.size)
		return p.heavyFree == hs && p.free >= hs
	}
	return p.free > 0 && (!tk.heavy || p.heavyFree > 0)
}

// ahead reports whether a goes before b: heavier, then the first to join.
func ahead(a, b *Ticket) bool {
	return a.weight > b.weight || (a.weight == b.weight && a.seq < b.seq)
}

// done gives the slot back, or leaves the queue.
func (tk *Ticket) done() {
	p := tk.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if tk.granted {
		tk.granted = false
		switch {
		case tk.share:
			p.free += heavyShare(p.size)
			p.heavyFree = heavyShare(p.size)
		case tk.heavy:
			p.free++
			p.heavyFree++
		default:
			p.free++
		}
	}
	delete(p.waiting, tk)
	p.changed.Broadcast()
}

// Acquire joins the queue, opens the pool and waits for a slot: for a
// test that builds nothing shared before its lab.
func (p *Pool) Acquire(t testing.TB, weight int, heavy bool) {
	t.Helper()
	tk := p.Join(t, weight, heavy)
	p.Open()
	tk.Wait()
}

// Parallel calls t.Parallel unless the test already did (a test may call
// it first itself, before its lab helper; it then joins the queue only
// once it resumes, after the tests that joined before their t.Parallel).
func Parallel(t *testing.T) {
	defer func() {
		if r := recover(); r != nil && r != "testing: t.Parallel called multiple times" {
			panic(r)
		}
	}()
	t.Parallel()
}
