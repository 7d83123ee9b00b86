package raycli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/dashboard"
	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/raylet"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// DaemonCommand is the internal simnode command that runs a node's Ray
// processes (GCS and dashboard on the head, the raylet everywhere) after
// `ray start` detaches it.
const DaemonCommand = "__ray-daemon"

// daemonConfig is written by `ray start` into the session directory and
// read by the daemon.
type daemonConfig struct {
	Head          bool         `json:"head"`
	GCSAddr       string       `json:"gcs_addr"`
	Port          int          `json:"port"`
	Node          gcs.NodeInfo `json:"node"`
	SessionName   string       `json:"session_name"`
	SessionDir    string       `json:"session_dir"`
	Dashboard     bool         `json:"dashboard"`
	DashboardHost string       `json:"dashboard_host"`
	DashboardPort int          `json:"dashboard_port"`
	Timing        map[string]string
}

// DaemonMain runs the daemon: args[0] is the config path. It reports
// readiness on fd 3 ("ok <node id>" or "error <text>") when present.
func DaemonMain(ctx context.Context, p *sim.Proc) int {
	ready := io.Writer(io.Discard)
	if f := os.NewFile(3, "ready"); f != nil {
		if _, err := f.Stat(); err == nil {
			ready = f
			defer f.Close()
		}
	}
	fail := func(err error) int {
		fmt.Fprintf(ready, "error %v\n", err)
		fmt.Fprintln(p.Stderr, err)
		return 1
	}
	if len(p.Args) < 1 {
		return fail(errors.New("usage: simnode __ray-daemon CONFIG"))
	}
	b, err := os.ReadFile(p.Args[0])
	if err != nil {
		return fail(err)
	}
	var cfg daemonConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fail(err)
	}
	tm, err := hw.TimingFromMap(cfg.Timing)
	if err != nil {
		return fail(err)
	}
	h, err := hw.Load(p.Env)
	if err != nil && !errors.Is(err, hw.ErrNoDriver) {
		return fail(err)
	}
	logs := filepath.Join(cfg.SessionDir, "logs")
	open := func(name string) io.Writer {
		f, err := os.OpenFile(filepath.Join(logs, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return io.Discard
		}
		return f
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if cfg.Head {
		ln, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", cfg.Port))
		if err != nil {
			return fail(fmt.Errorf("Failed to start GCS: %w", err))
		}
		srv := gcs.NewServer(gcs.Options{SessionName: cfg.SessionName, ClusterID: gcs.NewID(28), HeartbeatTimeout: tm.Get("heartbeat_timeout"), Now: p.Now, Log: open("gcs_server.out"), Pid: p.Pid})
		go func() { _ = srv.Serve(ctx, ln) }()
		if cfg.Dashboard {
			dl, err := net.Listen("tcp", net.JoinHostPort(cfg.DashboardHost, fmt.Sprint(cfg.DashboardPort)))
			if err != nil {
				fmt.Fprintf(open("dashboard.log"), "Failed to start the dashboard: %v\n", err)
			} else {
				hs := &http.Server{Handler: dashboard.Handler(srv, p.Now, dashboard.LoadAuth(p.Env.Get)), ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = hs.Serve(dl) }()
				go func() {
					<-ctx.Done()
					_ = hs.Close()
				}()
			}
		}
	}
	r, err := raylet.Start(ctx, raylet.Config{
		GCSAddr: cfg.GCSAddr, Node: cfg.Node, Env: p.Env, Exe: p.Exe, LogDir: logs, Timing: tm, HW: h,
		Ledger: memledger.Open(p.Env), Now: p.Now, Pid: p.Pid, Log: open("raylet.out"),
	})
	if err != nil {
		return fail(fmt.Errorf("raylet failed to register with the GCS at %s: %w", cfg.GCSAddr, err))
	}
	fmt.Fprintf(ready, "ok %s\n", r.NodeID())
	if c, ok := ready.(io.Closer); ok {
		c.Close()
	}
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(p.Stderr, err)
		return 1
	}
	return 0
}
