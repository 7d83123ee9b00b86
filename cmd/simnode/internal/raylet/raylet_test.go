package raylet

import (
	"context"
	"flag"
	"net"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/golden"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

var update = flag.Bool("update", false, "rewrite golden files")

func startGCS(t *testing.T, heartbeatTimeout time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := gcs.NewServer(gcs.Options{SessionName: "session_test", HeartbeatTimeout: heartbeatTimeout})
	go func() { _ = srv.Serve(ctx, ln) }()
	return ln.Addr().String()
}

func startRaylet(t *testing.T, addr, ip string, head bool, tm *hw.Timing) (*Raylet, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Start(ctx, Config{GCSAddr: addr, Node: gcs.NodeInfo{NodeIP: ip, IsHead: head, Resources: map[string]float64{"GPU": 1, "CPU": 4, "node:" + ip: 1}},
		Env: sim.Env{}, Timing: tm, Ledger: memledger.At(t.TempDir())})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		done <- r.Run(ctx)
		close(finished)
	}()
	t.Cleanup(func() { cancel(); <-finished })
	return r, cancel, done
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func states(t *testing.T, addr string) map[string]string {
	t.Helper()
	c, err := gcs.Dial(context.Background(), addr, time.Second, gcs.Hello{Role: "client"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, n := range st.Nodes {
		m[n.NodeIP] = n.State + "/" + n.StateMessage
	}
	return m
}

func TestNodeLifecycle(t *testing.T) {
	tm := hw.DefaultTiming(sim.Env{"SIMNODE_HEARTBEAT_PERIOD": "20ms", "SIMNODE_GCS_RECONNECT": "50ms"})
	addr := startGCS(t, 200*time.Millisecond)
	startRaylet(t, addr, "192.168.200.12", true, tm)
	lost, _, lostDone := startRaylet(t, addr, "192.168.200.13", false, tm)
	_, stop, stopDone := startRaylet(t, addr, "192.168.200.14", false, tm)
	if got := states(t, addr); len(got) != 3 || got["192.168.200.13"] != "ALIVE/" {
		t.Fatalf("states = %v, want three ALIVE nodes", got)
	}
	// A graceful stop unregisters at once.
	stop()
	<-stopDone
	waitFor(t, "stopped node DEAD", func() bool { return states(t, addr)["192.168.200.14"] == "DEAD/Expected termination: received SIGTERM" })
	// A raylet that vanishes is declared dead after missed heartbeats, and
	// gives up on the GCS it lost.
	lost.client.Conn.Close()
	waitFor(t, "lost node DEAD", func() bool {
		return states(t, addr)["192.168.200.13"] == "DEAD/Unexpected termination: health check failed due to missing too many heartbeats"
	})
	if err := <-lostDone; err == nil {
		t.Error("raylet that lost the GCS returned nil, want an error")
	}
	if got := states(t, addr)["192.168.200.12"]; got != "ALIVE/" {
		t.Errorf("head state %q", got)
	}
}

func TestPlacementGroupAnchor(t *testing.T) {
	tm := hw.DefaultTiming(sim.Env{"SIMNODE_HEARTBEAT_PERIOD": "50ms"})
	addr := startGCS(t, 5*time.Second)
	startRaylet(t, addr, "192.168.200.12", true, tm)
	startRaylet(t, addr, "192.168.200.13", false, tm)
	c, err := gcs.Dial(context.Background(), addr, time.Second, gcs.Hello{Role: "driver"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	tests := []struct {
		name   string
		anchor string
		gpus   int
		ready  bool
	}{
		{"anchor on a registered IP", "192.168.200.12", 2, true},
		{"anchor on an IP no node registered", "10.1.230.180", 1, false},
		{"more GPUs than the cluster has", "192.168.200.12", 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]map[string]float64, tt.gpus)
			for i := range b {
				b[i] = map[string]float64{"GPU": 1}
			}
			b[0]["node:"+tt.anchor] = 0.001
			var pg gcs.PGState
			if err := c.Conn.Call(ctx, "create_pg", gcs.PGRequest{Bundles: b, Strategy: "PACK"}, &pg); err != nil {
				t.Fatal(err)
			}
			var st gcs.PGState
			if err := c.Conn.Call(ctx, "wait_pg", gcs.PGWait{ID: pg.ID, TimeoutMs: 100}, &st); err != nil {
				t.Fatal(err)
			}
			if st.Ready != tt.ready {
				t.Errorf("ready = %v, want %v", st.Ready, tt.ready)
			}
		})
	}
}

func TestMonitorConfig(t *testing.T) {
	tests := []struct {
		env       sim.Env
		refresh   time.Duration
		threshold float64
	}{
		{sim.Env{}, 250 * time.Millisecond, 0.95},
		{sim.Env{"RAY_memory_monitor_refresh_ms": "0"}, 0, 0.95},
		{sim.Env{"RAY_memory_monitor_refresh_ms": "20", "RAY_memory_usage_threshold": "0.9"}, 20 * time.Millisecond, 0.9},
	}
	for _, tt := range tests {
		r, th := MonitorConfig(tt.env)
		if r != tt.refresh || th != tt.threshold {
			t.Errorf("MonitorConfig(%v) = %v, %v; want %v, %v", tt.env, r, th, tt.refresh, tt.threshold)
		}
	}
}

// The seed's numbers: 113.78GB / 119.70GB on a DGX Spark; text from Ray's
// OutOfMemoryError (ray-vllm-facts.md §3.7, Ray issue reports).
func TestOOMMessage(t *testing.T) {
	msg := OOMMessage(OOMInfo{
		NodeIP: "192.168.200.12", NodeID: "d47bda43c0ffee0000000000000000000000000000000000000000aa", ActorID: "7bed0f82dacfd65c11c2b1734cfd533c", TaskName: "RayWorkerWrapper.execute_method",
		WorkerID: "0f7695fad1848c8703eb36240efa3a80cb82ea43206919f4aaaaaaaa", PID: 1544, ProcBytes: 110826 * hw.MiB, UsedBytes: 116510 * hw.MiB, TotalBytes: 122572 * hw.MiB, Threshold: 0.95,
		Top: []memledger.Entry{{PID: 1544, SysMiB: 110826, Command: "ray::RayWorkerWrapper.execute_method"}},
	})
	golden.Check(t, *update, "ray/oom-message.golden", msg+"\n")
}
