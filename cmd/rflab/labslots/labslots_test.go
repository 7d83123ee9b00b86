package labslots

import (
	"slices"
	"sync"
	"testing"
	"time"
)

func TestSlots(t *testing.T) {
	tests := []struct {
		env     string
		def     int
		want    int
		wantErr bool
	}{
		{"", 4, 4, false},
		{"1", 4, 1, false},
		{"6", 3, 6, false},
		{"0", 4, 0, true},
		{"-2", 4, 0, true},
		{"many", 4, 0, true},
	}
	for _, tt := range tests {
		got, err := Slots(tt.env, tt.def)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Slots(%q, %d) = %d, %v; want %d (error %v)", tt.env, tt.def, got, err, tt.want, tt.wantErr)
		}
	}
}

// fakeTB records cleanups and runs them, last first, when told.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}
func (f *fakeTB) runCleanups() {
	f.mu.Lock()
	fns := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// tryGrant grants tk a slot if it is its turn, as Wait does without
// blocking, and reports whether tk holds one.
func (p *Pool) tryGrant(tk *Ticket) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grant(tk)
}

// waitGranted waits (bounded) for a ticket's Wait to return.
func waitGranted(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s got no slot", what)
	}
}

// TestSlotHeldUntilTheLabIsDown: with every slot taken, the next test
// waits; the slot is still held while the first test's lab goes down (a
// cleanup registered after Join) and comes free after it.
func TestSlotHeldUntilTheLabIsDown(t *testing.T) {
	p := New(1)
	first := &fakeTB{TB: t}
	p.Acquire(first, 0, false)
	first.Cleanup(func() { // the lab's teardown
		if p.free != 0 {
			t.Error("the slot was given back before the lab was down")
		}
	})
	acquired := make(chan struct{})
	second := &fakeTB{TB: t}
	go func() {
		p.Acquire(second, 0, false)
		close(acquired)
	}()
	first.runCleanups()
	waitGranted(t, "the second test", acquired)
	second.runCleanups()
	if p.free != 1 || len(p.waiting) != 0 {
		t.Errorf("after both tests: %d of 1 slots free, %d waiting", p.free, len(p.waiting))
	}
}

// TestHeaviestFirst: tickets that joined before the pool opened are
// granted heaviest first, equal weights in the order they joined.
func TestHeaviestFirst(t *testing.T) {
	p := New(1)
	weights := []int{0, 2, 1, 2, 0}
	tbs := make([]*fakeTB, len(weights))
	grants := make(chan int, len(weights))
	for i, w := range weights {
		tbs[i] = &fakeTB{TB: t}
		tk := p.Join(tbs[i], w, false)
		go func() {
			tk.Wait()
			grants <- i
		}()
	}
	p.Open()
	var order []int
	for range weights {
		select {
		case i := <-grants:
			order = append(order, i)
			tbs[i].runCleanups() // its lab is down: the next one goes
		case <-time.After(10 * time.Second):
			t.Fatalf("no grant after %v", order)
		}
	}
	if want := []int{1, 3, 2, 0, 4}; !slices.Equal(order, want) {
		t.Errorf("granted in order %v, want %v (weights %v)", order, want, weights)
	}
}

// TestClosedUntilOpen: nothing is granted before Open, however many slots
// are free.
func TestClosedUntilOpen(t *testing.T) {
	p := New(2)
	tb := &fakeTB{TB: t}
	tk := p.Join(tb, 0, false)
	p.mu.Lock()
	before := p.grant(tk)
	p.mu.Unlock()
	if before {
		t.Error("a slot was granted before Open")
	}
	p.Open()
	p.mu.Lock()
	after := p.grant(tk)
	p.mu.Unlock()
	if !after {
		t.Error("no slot granted after Open with 2 free")
	}
	tb.runCleanups()
}

// TestLeaveTheQueue: a test that ends before its turn (a failed build)
// leaves the queue and does not hold up the ones behind it.
func TestLeaveTheQueue(t *testing.T) {
	p := New(1)
	failed, next := &fakeTB{TB: t}, &fakeTB{TB: t}
	p.Join(failed, 5, false)
	tk := p.Join(next, 0, false)
	failed.runCleanups()
	p.Open()
	granted := make(chan struct{})
	go func() {
		tk.Wait()
		close(granted)
	}()
	waitGranted(t, "the ticket behind the one that left", granted)
	next.runCleanups()
	if p.free != 1 {
		t.Errorf("%d of 1 slots free after every test ended", p.free)
	}
}

// TestHeavyShare: of 4 slots, 2 go to heavy labs; a light lab behind a
// waiting heavy one takes a free slot the heavy one may not have, and the
// heavy one goes first once a heavy slot is free.
func TestHeavyShare(t *testing.T) {
	p := New(4)
	p.Open()
	grant := p.tryGrant
	heavy := make([]*fakeTB, 3)
	tks := make([]*Ticket, 3)
	for i := range heavy {
		heavy[i] = &fakeTB{TB: t}
		tks[i] = p.Join(heavy[i], 2, true)
	}
	light := &fakeTB{TB: t}
	lightTk := p.Join(light, 0, false)
	if !grant(tks[0]) || !grant(tks[1]) {
		t.Fatal("the first two heavy labs got no slot of 4")
	}
	if grant(tks[2]) {
		t.Error("a third heavy lab got a slot: the heavy share of 4 is 2")
	}
	if !grant(lightTk) {
		t.Error("the light lab behind the waiting heavy one got none of the 2 free slots")
	}
	heavy[0].runCleanups()
	if !grant(tks[2]) {
		t.Error("the waiting heavy lab got no slot once a heavy one was down")
	}
	for _, tb := range append(heavy[1:], light) {
		tb.runCleanups()
	}
	if p.free != 4 || p.heavyFree != 2 {
		t.Errorf("after every test: %d free, %d heavy free; want 4 and 2", p.free, p.heavyFree)
	}
}

// TestParallelTwice: a test that called t.Parallel itself may go through
// Parallel again.
func TestParallelTwice(t *testing.T) {
	t.Parallel()
	Parallel(t)
}

// TestWholeBudget: a lab that takes the pool's whole budget (JoinWhole)
// waits until every slot is free, holds them all, and no lab behind it
// starts while it waits (it would never find the pool empty otherwise).
func TestWholeBudget(t *testing.T) {
	p := New(4)
	p.Open()
	grant := p.tryGrant
	first := &fakeTB{TB: t}
	firstTk := p.Join(first, 0, false)
	if !grant(firstTk) {
		t.Fatal("the first lab got no slot of 4")
	}
	whole := &fakeTB{TB: t}
	wholeTk := p.JoinWhole(whole, 9)
	later := &fakeTB{TB: t}
	laterTk := p.Join(later, 0, false)
	if grant(wholeTk) {
		t.Error("the whole-budget lab started beside another lab")
	}
	if grant(laterTk) {
		t.Error("a lab behind the waiting whole-budget lab took one of the 3 free slots")
	}
	first.runCleanups()
	if !grant(wholeTk) {
		t.Fatal("the whole-budget lab got no slots once the pool was empty")
	}
	if p.free != 0 || p.heavyFree != 0 {
		t.Errorf("the whole-budget lab holds %d free, %d heavy free; want 0 and 0", p.free, p.heavyFree)
	}
	if grant(laterTk) {
		t.Error("a lab started beside the whole-budget lab")
	}
	whole.runCleanups()
	if !grant(laterTk) {
		t.Error("the lab behind got no slot once the whole-budget lab was down")
	}
	later.runCleanups()
	if p.free != 4 || p.heavyFree != 2 {
		t.Errorf("after every test: %d free, %d heavy free; want 4 and 2", p.free, p.heavyFree)
	}
}
