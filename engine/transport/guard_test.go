package transport_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

func TestGuardChecksBeforeEveryChange(t *testing.T) {
	fake := transporttest.NewFake(t, "spark1")
	fake.Expect(transporttest.Any())
	lost := errors.New("lock lost")
	var err error
	g := transport.Guard(fake, func() error { return err })
	ctx := context.Background()
	if _, e := g.Run(ctx, transport.Cmd{Argv: []string{"docker", "rm", "x"}, Mutating: true}); e != nil {
		t.Fatalf("mutating command while the check passes: %v", e)
	}
	err = lost
	if _, e := g.Run(ctx, transport.Cmd{Argv: []string{"docker", "ps"}}); e != nil {
		t.Fatalf("a read-only command is refused: %v", e)
	}
	if _, e := g.Run(ctx, transport.Cmd{Argv: []string{"docker", "rm", "y"}, Mutating: true}); !errors.Is(e, lost) {
		t.Fatalf("mutating command after the check failed = %v, want the check's error", e)
	}
	if e := g.Upload(ctx, "/tmp/x", nil, 0o600); !errors.Is(e, lost) {
		t.Fatalf("Upload after the check failed = %v", e)
	}
	for _, c := range fake.Calls() {
		if c.Cmd.String() == "docker rm y" {
			t.Fatal("the refused command reached the host")
		}
	}
}
