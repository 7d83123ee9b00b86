package transport_test

import (
	"context"
	"errors"
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
