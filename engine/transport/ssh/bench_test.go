package ssh

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
)

// BenchmarkCommand measures one command on an established connection.
func BenchmarkCommand(b *testing.B) {
	for _, kind := range serverKinds {
		b.Run(kind, func(b *testing.B) {
			_, opts := benchEnv(b, kind, 1)
			d := newDialer(b, opts)
			c, err := d.Dial(context.Background(), "node-0")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				if _, err := c.Run(ctx, transport.Cmd{Argv: []string{"true"}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Benchmark32CommandsOneConnection dials a host and runs 32 commands on it;
// it reports the handshakes per 32 commands (must be 1).
func Benchmark32CommandsOneConnection(b *testing.B) {
	for _, kind := range serverKinds {
		b.Run(kind, func(b *testing.B) {
			_, opts := benchEnv(b, kind, 1)
			ctx := context.Background()
			handshakes := 0
			for b.Loop() {
				d, err := NewDialer(opts)
				if err != nil {
					b.Fatal(err)
				}
				c, err := d.Dial(ctx, "node-0")
				if err != nil {
					b.Fatal(err)
				}
				for range 32 {
					if _, err := c.Run(ctx, transport.Cmd{Argv: []string{"true"}}); err != nil {
						b.Fatal(err)
					}
				}
				handshakes += c.Stats().Handshakes
				d.Close()
			}
			b.ReportMetric(float64(handshakes)/float64(b.N), "handshakes/op")
		})
	}
}

// BenchmarkParallelDial dials 8 hosts (8 sshd on loopback ports) at once
// and compares the wall time with one handshake measured in the same
// iteration: "x-one-handshake" near 1 means the dials overlap fully.
func BenchmarkParallelDial(b *testing.B) {
	const n = 8
	for _, kind := range serverKinds {
		b.Run(kind, func(b *testing.B) {
			_, opts := benchEnv(b, kind, n)
			hosts := make([]string, n)
			for i := range hosts {
				hosts[i] = fmt.Sprintf("node-%d", i)
			}
			ctx := context.Background()
			var single, parallel time.Duration
			for b.Loop() {
				d1, _ := NewDialer(opts)
				start := time.Now()
				if _, err := d1.Dial(ctx, hosts[0]); err != nil {
					b.Fatal(err)
				}
				single += time.Since(start)
				d1.Close()

				d, _ := NewDialer(opts)
				start = time.Now()
				err := transport.ForEach(ctx, hosts, 0, func(ctx context.Context, h string) error {
					_, err := d.Dial(ctx, h)
					return err
				})
				parallel += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				d.Close()
			}
			b.ReportMetric(float64(single.Microseconds())/1000/float64(b.N), "ms-one-handshake")
			b.ReportMetric(float64(parallel.Microseconds())/1000/float64(b.N), "ms-8-parallel")
			b.ReportMetric(float64(parallel)/float64(single), "x-one-handshake")
		})
	}
}
