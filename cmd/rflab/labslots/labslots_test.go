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

// TestHeavyShareLab: a lab that takes the pool's heavy share (JoinHeavyShare)
// waits until no heavy lab is up; while it waits, a light lab behind it
// starts only in a slot beyond its share, and no heavy one (it would never
// find the heavy slots free otherwise); then it holds every heavy slot and
// as many slots, and light labs, not heavy ones, start beside it in the
// slots left.
func TestHeavyShareLab(t *testing.T) {
	p := New(4)
	p.Open()
	grant := p.tryGrant
	heavy := &fakeTB{TB: t}
	heavyTk := p.Join(heavy, 2, true)
	if !grant(heavyTk) {
		t.Fatal("the heavy lab got no slot of 4")
	}
	share := &fakeTB{TB: t}
	shareTk := p.JoinHeavyShare(share, 9)
	light1, light2, light3 := &fakeTB{TB: t}, &fakeTB{TB: t}, &fakeTB{TB: t}
	light1Tk := p.Join(light1, 0, false)
	light2Tk := p.Join(light2, 0, false)
	heavy2 := &fakeTB{TB: t}
	heavy2Tk := p.Join(heavy2, 2, true)
	if grant(shareTk) {
		t.Error("the heavy-share lab started beside a heavy lab")
	}
	if grant(heavy2Tk) {
		t.Error("a heavy lab went before the waiting heavy-share lab")
	}
	if !grant(light1Tk) {
		t.Error("a light lab behind the waiting heavy-share lab got none of the 3 free slots (2 are the share's)")
	}
	if grant(light2Tk) {
		t.Error("a second light lab took one of the waiting heavy-share lab's 2 slots")
	}
	heavy.runCleanups()
	if !grant(shareTk) {
		t.Fatal("the heavy-share lab got no slots once no heavy lab was up")
	}
	if p.free != 1 || p.heavyFree != 0 {
		t.Errorf("the heavy-share lab and a light one leave %d free, %d heavy free; want 1 and 0", p.free, p.heavyFree)
	}
	light3Tk := p.Join(light3, 0, false)
	if grant(heavy2Tk) {
		t.Error("a heavy lab started beside the heavy-share lab")
	}
	if !grant(light2Tk) {
		t.Error("the light lab got no slot of the 2 left beside the heavy-share lab")
	}
	if grant(light3Tk) {
		t.Error("a third light lab started in a pool of 4 beside the heavy-share lab")
	}
	share.runCleanups()
	if !grant(heavy2Tk) {
		t.Error("the heavy lab got no slot once the heavy-share lab was down")
	}
	for _, tb := range []*fakeTB{light1, light2, heavy2} {
		tb.runCleanups()
	}
	if !grant(light3Tk) {
		t.Error("the last light lab got no slot in an empty pool")
	}
	light3.runCleanups()
	if p.free != 4 || p.heavyFree != 2 {
		t.Errorf("after every test: %d free, %d heavy free; want 4 and 2", p.free, p.heavyFree)
	}
}

// TestHeavyShareLabInSmallPools: a pool of 1 slot gives the heavy-share lab
// all of it; a pool of 2, one (its heavy share), with one light lab beside.
func TestHeavyShareLabInSmallPools(t *testing.T) {
	for _, tt := range []struct{ size, freeBeside int }{{1, 0}, {2, 1}, {3, 1}} {
		p := New(tt.size)
		p.Open()
		share := &fakeTB{TB: t}
		shareTk := p.JoinHeavyShare(share, 9)
		if !p.tryGrant(shareTk) {
			t.Fatalf("pool of %d: the heavy-share lab got no slot in an empty pool", tt.size)
		}
		if p.free != tt.freeBeside || p.heavyFree != 0 {
			t.Errorf("pool of %d: %d free, %d heavy free beside the heavy-share lab; want %d and 0", tt.size, p.free, p.heavyFree, tt.freeBeside)
		}
		share.runCleanups()
		if p.free != tt.size || p.heavyFree != heavyShare(tt.size) {
			t.Errorf("pool of %d: %d free, %d heavy free after; want %d and %d", tt.size, p.free, p.heavyFree, tt.size, heavyShare(tt.size))
		}
	}
}
