//go:build linux

package lab

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// delayedPackets returns how many packets the delay queue of node has held.
func delayedPackets(t testing.TB, l *Lab, node string) uint64 {
	t.Helper()
	st := l.Status(context.Background())
	p, ok := st.Procs[nodeProcID(node, "delay")]
	if !ok || !p.Running {
		t.Fatalf("delay queue of %s: %+v (present %v)", node, p, ok)
	}
	n, err := strconv.ParseUint(strings.Fields(p.Exit)[0], 10, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", p.Exit, err)
	}
	return n
}

func TestImpairments(t *testing.T) {
	t.Parallel() // its subtests take labs (see upLab)
	tests := []struct {
		name      string
		delay     time.Duration
		loss      float64
		reachable bool
		queued    bool
	}{
		{name: "delay", delay: 20 * time.Millisecond, reachable: true, queued: true},
		{name: "total loss", loss: 100, reachable: false},
		{name: "delay and some loss", delay: 5 * time.Millisecond, loss: 1, reachable: true, queued: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := upLab(t, Config{Name: testLabName("rfl-imp" + strconv.Itoa(i)), Nodes: 1, NoDocker: true, Delay: tt.delay, Loss: tt.loss})
			before := uint64(0)
			if tt.queued {
				before = delayedPackets(t, l, "spark1")
			}
			err := dialFrom(l, ClientName, "10.1.230.180:22")
			if (err == nil) != tt.reachable {
				t.Fatalf("dial spark1's sshd: %v, want reachable=%v", err, tt.reachable)
			}
			if tt.reachable {
				// SSH works through the queue (every packet gets its verdict).
				if got := strings.TrimSpace(sshOK(t, l, "spark1", "hostname")); got != "spark1" {
					t.Errorf("hostname over a delayed link = %q", got)
				}
			}
			if tt.queued {
				if after := delayedPackets(t, l, "spark1"); after <= before {
					t.Errorf("delay queue held %d packets before and %d after a connection", before, after)
				}
			}
		})
	}
}

// BenchmarkDelayedConnect reports the TCP connect time from the client to a
// node's sshd with and without a 20ms management delay.
func BenchmarkDelayedConnect(b *testing.B) {
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		b.Run("delay="+delay.String(), func(b *testing.B) {
			l := upLab(b, Config{Name: testLabName("rfl-bdelay"), Nodes: 1, NoDocker: true, Delay: delay})
			b.ResetTimer()
			for range b.N {
				if err := dialFrom(l, ClientName, "10.1.230.180:22"); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			downAndCheck(b, Config{Name: testLabName("rfl-bdelay")})
		})
	}
}
