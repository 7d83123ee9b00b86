package transport

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
)

// blockingDialer dials only when released, counting dials.
type blockingDialer struct {
	release chan struct{}
	mu      sync.Mutex
	dials   int
	err     error
}

func (d *blockingDialer) Dial(ctx context.Context, host string) (Conn, error) {
	d.mu.Lock()
	d.dials++
	d.mu.Unlock()
	select {
	case <-d.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if d.err != nil {
		return nil, d.err
	}
	return stubConn{host}, nil
}

type stubConn struct{ host string }

func (c stubConn) Host() string                                         { return c.host }
func (c stubConn) Run(context.Context, Cmd) (Result, error)             { return Result{}, nil }
func (c stubConn) Upload(context.Context, string, []byte, uint32) error { return nil }
func (c stubConn) Stats() Stats                                         { return Stats{} }
func (c stubConn) Close() error                                         { return nil }

// until spins (yielding) until cond holds: a state another goroutine
// reaches without blocking on anything this test controls.
func until(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// TestLazyConnectIsShared: Connect dials ahead of use, and a call made
// while that dial is in flight waits for it instead of dialling again,
// whether it succeeds or fails.
func TestLazyConnectIsShared(t *testing.T) {
	for _, dialErr := range []error{nil, errors.New("no route to host")} {
		d := &blockingDialer{release: make(chan struct{}), err: dialErr}
		l := Lazy(d, "spark1").(*lazyConn)
		connected := make(chan error, 1)
		go func() { connected <- Connect(context.Background(), l) }()
		until(func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.dials == 1 })
		ran := make(chan error, 1)
		go func() {
			_, err := l.Run(context.Background(), Cmd{Script: "true"})
			ran <- err
		}()
		until(func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.waiters == 1 })
		close(d.release)
		if err := <-connected; !errors.Is(err, dialErr) {
			t.Errorf("Connect = %v, want %v", err, dialErr)
		}
		if err := <-ran; !errors.Is(err, dialErr) {
			t.Errorf("Run during the dial = %v, want %v", err, dialErr)
		}
		if d.dials != 1 {
			t.Errorf("dialled %d times, want 1 (dial error %v)", d.dials, dialErr)
		}
	}
}

// TestLazyWaitHonoursContext: a call waiting for a dial in flight returns
// when its own context ends.
func TestLazyWaitHonoursContext(t *testing.T) {
	d := &blockingDialer{release: make(chan struct{})}
	defer close(d.release)
	l := Lazy(d, "spark1").(*lazyConn)
	go func() { _ = Connect(context.Background(), l) }()
	until(func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.dials == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Run(ctx, Cmd{Script: "true"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context while dialling = %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiters != 0 {
		t.Fatalf("%d waiters left after the cancelled call", l.waiters)
	}
}
