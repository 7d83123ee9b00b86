package labslots

import (
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
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// TestAcquireHoldsUntilTheLabIsDown: with every slot taken, the next test
// waits; the slot is still held while the first test's lab goes down (a
// cleanup registered after Acquire) and comes free after it.
func TestAcquireHoldsUntilTheLabIsDown(t *testing.T) {
	p := &Pool{slots: make(chan struct{}, 1)}
	first := &fakeTB{TB: t}
	p.Acquire(first)
	first.Cleanup(func() { // the lab's teardown
		if len(p.slots) != 1 {
			t.Error("the slot was given back before the lab was down")
		}
	})
	acquired := make(chan struct{})
	second := &fakeTB{TB: t}
	go func() {
		p.Acquire(second)
		close(acquired)
	}()
	first.runCleanups()
	select {
	case <-acquired:
	case <-time.After(10 * time.Second):
		t.Fatal("the second test got no slot after the first lab was down")
	}
	second.runCleanups()
	if len(p.slots) != 0 {
		t.Errorf("%d slots held after both tests ended", len(p.slots))
	}
}
