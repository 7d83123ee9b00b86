package transport_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

func TestReadOnly(t *testing.T) {
	tests := []struct {
		name     string
		cmd      transport.Cmd
		wantErr  error
		wantSent bool
	}{
		{"read-only command passes", transport.Cmd{Argv: []string{"docker", "ps"}}, nil, true},
		{"mutating command refused", transport.Cmd{Argv: []string{"docker", "rm", "-f", "x"}, Mutating: true}, transport.ErrReadOnly, false},
		{"mutating script refused", transport.Cmd{Script: "rm -rf /tmp/x", Mutating: true}, transport.ErrReadOnly, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := transporttest.NewFake(t, "gpu-1")
			fake.Expect(transporttest.Any()).Return("ok")
			ro := transport.ReadOnly(fake)
			_, err := ro.Run(context.Background(), tt.cmd)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run err = %v, want %v", err, tt.wantErr)
			}
			if err != nil && err.Error() != "gpu-1: \""+tt.cmd.String()+"\": "+transport.ErrReadOnly.Error() {
				t.Errorf("error %q should name host and command", err)
			}
			if sent := len(fake.Calls()) == 1; sent != tt.wantSent {
				t.Errorf("command reached the host: %v, want %v", sent, tt.wantSent)
			}
		})
	}
}

func TestReadOnlyRefusesUpload(t *testing.T) {
	fake := transporttest.NewFake(t, "gpu-1")
	ro := transport.ReadOnly(transport.ReadOnly(fake)) // wrapping twice is harmless
	err := ro.Upload(context.Background(), "/etc/x", []byte("x"), 0o644)
	if !errors.Is(err, transport.ErrReadOnly) {
		t.Fatalf("Upload err = %v, want ErrReadOnly", err)
	}
	if len(fake.Calls()) != 0 {
		t.Errorf("upload reached the host: %v", fake.Calls())
	}
	if ro.Host() != "gpu-1" {
		t.Errorf("Host() = %q", ro.Host())
	}
}

func TestReadOnlyDialer(t *testing.T) {
	d := transporttest.NewFakeDialer(t)
	d.Host("a")
	c, err := transport.ReadOnlyDialer(d).Dial(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(context.Background(), transport.Cmd{Script: "touch x", Mutating: true}); !errors.Is(err, transport.ErrReadOnly) {
		t.Errorf("Run through a read-only dialer: %v, want ErrReadOnly", err)
	}
}
