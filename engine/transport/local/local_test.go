package local_test

import (
	"context"
	"testing"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

func TestConformance(t *testing.T) {
	transporttest.RunConformance(t, func(t *testing.T) transport.Conn {
		return local.New(local.Options{Host: "localhost"})
	}, transporttest.LocalHost{})
}

func TestDialerNamesHost(t *testing.T) {
	tests := []string{"localhost", "node-a"}
	for _, host := range tests {
		c, err := local.Dialer{}.Dial(context.Background(), host)
		if err != nil {
			t.Fatalf("Dial(%q): %v", host, err)
		}
		if c.Host() != host {
			t.Errorf("Dial(%q).Host() = %q", host, c.Host())
		}
		if s := c.Stats(); s.Handshakes != 0 || s.RoundTrips != 0 {
			t.Errorf("fresh local conn stats = %+v, want zero", s)
		}
	}
}
