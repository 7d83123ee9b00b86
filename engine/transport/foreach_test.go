package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestForEachBoundsParallelism(t *testing.T) {
	tests := []struct {
		name        string
		hosts       int
		parallelism int
		wantMax     int
	}{
		{"bounded", 10, 3, 3},
		{"one at a time", 4, 1, 1},
		{"zero means all", 5, 0, 5},
		{"more than hosts", 2, 8, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hosts := make([]string, tt.hosts)
			for i := range hosts {
				hosts[i] = fmt.Sprintf("h%d", i)
			}
			var running, maxRunning, calls atomic.Int32
			full := make(chan struct{}) // closed once wantMax run together
			var once sync.Once
			err := ForEach(ctx, hosts, tt.parallelism, func(ctx context.Context, host string) error {
				calls.Add(1)
				n := running.Add(1)
				defer running.Add(-1)
				for {
					m := maxRunning.Load()
					if n <= m || maxRunning.CompareAndSwap(m, n) {
						break
					}
				}
				if n == int32(tt.wantMax) {
					once.Do(func() { close(full) })
				}
				select {
				case <-full:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			if err != nil {
				t.Fatalf("ForEach: %v (never reached %d concurrent calls)", err, tt.wantMax)
			}
			if got := maxRunning.Load(); got != int32(tt.wantMax) {
				t.Errorf("max concurrent = %d, want %d", got, tt.wantMax)
			}
			if got := calls.Load(); got != int32(tt.hosts) {
				t.Errorf("calls = %d, want %d", got, tt.hosts)
			}
		})
	}
}

func TestForEachCollectsEveryError(t *testing.T) {
	errA := errors.New("boom a")
	errC := errors.New("boom c")
	var mu sync.Mutex
	var called []string
	err := ForEach(context.Background(), []string{"a", "b", "c", "d"}, 2, func(ctx context.Context, host string) error {
		mu.Lock()
		called = append(called, host)
		mu.Unlock()
		switch host {
		case "a":
			return errA
		case "c":
			return errC
		}
		return nil
	})
	slices.Sort(called)
	if !slices.Equal(called, []string{"a", "b", "c", "d"}) {
		t.Errorf("called %v, want every host despite failures", called)
	}
	if !errors.Is(err, errA) || !errors.Is(err, errC) {
		t.Fatalf("err = %v, want both causes", err)
	}
	if want := "a: boom a\nc: boom c"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestForEachCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int32
	err := ForEach(ctx, []string{"a", "b"}, 1, func(ctx context.Context, host string) error {
		calls.Add(1)
		return nil
	})
	if calls.Load() != 0 {
		t.Errorf("fn called %d times after cancel", calls.Load())
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "b: not started") {
		t.Errorf("err = %v, want context.Canceled per host", err)
	}
}

func TestForEachNoHosts(t *testing.T) {
	if err := ForEach(context.Background(), nil, 4, func(context.Context, string) error {
		return errors.New("must not be called")
	}); err != nil {
		t.Errorf("ForEach(nil) = %v", err)
	}
}
