package transport_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

type countingDialer struct {
	dials int
	err   error
}

func (d *countingDialer) Dial(ctx context.Context, host string) (transport.Conn, error) {
	d.dials++
	if d.err != nil {
		return nil, d.err
	}
	return local.New(local.Options{Host: host}), nil
}

func TestLazyDialsOnceOnFirstUse(t *testing.T) {
	d := &countingDialer{}
	c := transport.Lazy(d, "spark1")
	if d.dials != 0 {
		t.Fatal("Lazy dialled before use")
	}
	for i := 0; i < 3; i++ {
		res, err := c.Run(context.Background(), transport.Cmd{Script: "echo hi"})
		if err != nil || string(res.Stdout) != "hi\n" {
			t.Fatalf("Run = %q, %v", res.Stdout, err)
		}
	}
	if d.dials != 1 {
		t.Fatalf("dialled %d times, want 1", d.dials)
	}
	if c.Stats().RoundTrips != 3 {
		t.Fatalf("Stats = %+v, want 3 round trips", c.Stats())
	}
}

func TestLazyReturnsDialError(t *testing.T) {
	boom := errors.New("connection refused")
	c := transport.Lazy(&countingDialer{err: boom}, "spark2")
	if _, err := c.Run(context.Background(), transport.Cmd{Script: "true"}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if c.Stats() != (transport.Stats{}) {
		t.Fatal("stats of an undialled conn are not zero")
	}
}

// blockingDialer dials only when released, counting dials.
type blockingDialer struct {
	release chan struct{}
	mu      sync.Mutex
	dials   int
	err     error
}

func (d *blockingDialer) Dial(ctx context.Context, host string) (transport.Conn, error) {
	d.mu.Lock()
	d.dials++
	d.mu.Unlock()
	<-d.release
	if d.err != nil {
		return nil, d.err
	}
	return local.New(local.Options{Host: host}), nil
}

// TestLazyConnectIsShared: Connect dials ahead of use, and a call made
// while that dial is in flight waits for it instead of dialling again,
// whether it succeeds or fails.
func TestLazyConnectIsShared(t *testing.T) {
	for _, dialErr := range []error{nil, errors.New("no route to host")} {
		d := &blockingDialer{release: make(chan struct{}), err: dialErr}
		c := transport.Lazy(d, "spark1")
		connected := make(chan error, 1)
		go func() { connected <- transport.Connect(context.Background(), c) }()
		// Wait until the dial is in flight, then start a Run that must
		// join it.
		for {
			d.mu.Lock()
			n := d.dials
			d.mu.Unlock()
			if n == 1 {
				break
			}
			runtime.Gosched()
		}
		ran := make(chan error, 1)
		go func() {
			_, err := c.Run(context.Background(), transport.Cmd{Script: "true"})
			ran <- err
		}()
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

func TestLazyWaitHonoursContext(t *testing.T) {
	d := &blockingDialer{release: make(chan struct{})}
	defer close(d.release)
	c := transport.Lazy(d, "spark1")
	go func() { _ = transport.Connect(context.Background(), c) }()
	for {
		d.mu.Lock()
		n := d.dials
		d.mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Run(ctx, transport.Cmd{Script: "true"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context while dialling = %v", err)
	}
}
