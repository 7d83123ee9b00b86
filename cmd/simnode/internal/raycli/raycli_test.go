package raycli

import (
	"bytes"
	"context"
	"flag"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/golden"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

var update = flag.Bool("update", false, "rewrite golden files")

func fixedNow() time.Time { return time.Date(2026, 11, 29, 23, 20, 0, 123000000, time.UTC) }

func proc(t *testing.T, args ...string) (*sim.Proc, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var out, errb bytes.Buffer
	env := sim.Env{"RAY_TMPDIR": t.TempDir(), "SIMNODE_HARDWARE": golden.Path("hardware", "gb10.json"), "SIMNODE_STATE_DIR": t.TempDir(), "PATH": "/usr/bin:/bin"}
	return &sim.Proc{Args: args, Env: env, Stdout: &out, Stderr: &errb, Now: fixedNow, Pid: 4242, Exe: "/nonexistent/simnode", Hostname: "spark1"}, &out, &errb
}

// Click's usage errors (exit 2) for every command, and Ray's own aborts
// (exit 1) for invalid combinations.
func TestRejections(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"start-unknown-option", []string{"start", "--head", "--bogus"}, 2},
		{"start-suggestion", []string{"start", "--hed"}, 2},
		{"start-bad-port", []string{"start", "--head", "--port", "six"}, 2},
		{"start-missing-value", []string{"start", "--address"}, 2},
		{"start-no-address", []string{"start"}, 1},
		{"start-worker-port", []string{"start", "--address", "10.0.0.1:6379", "--port", "6380"}, 1},
		{"start-bad-resources", []string{"start", "--head", "--resources", "{GPU:1}"}, 1},
		{"stop-unknown-option", []string{"stop", "--now"}, 2},
		{"status-unknown-option", []string{"status", "--json"}, 2},
		{"list-bad-resource", []string{"list", "nodez"}, 2},
		{"list-bad-format", []string{"list", "nodes", "--format", "xml"}, 2},
		{"unknown-command", []string{"strat"}, 2},
		{"status-no-cluster", []string{"status"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, out, errb := proc(t, tt.args...)
			code := Main(context.Background(), p)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errb)
			}
			golden.Check(t, *update, "ray/reject-"+tt.name+".golden", errb.String())
		})
	}
}

func TestNoCommandPrintsHelpAndExits2(t *testing.T) {
	p, _, errb := proc(t)
	if code := Main(context.Background(), p); code != 2 || !strings.HasPrefix(errb.String(), "Usage: ray [OPTIONS] COMMAND [ARGS]...") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	p, out, _ := proc(t, "--version")
	if code := Main(context.Background(), p); code != 0 || out.String() != "ray, version "+gcs.RayVersion+"\n" {
		t.Errorf("--version: exit %d, %q", code, out.String())
	}
}

// The started banner in record style (what `docker logs` shows), pinned
// against ray-vllm-facts.md §3.1 and Ray's scripts.py.
func TestStartedBanner(t *testing.T) {
	tests := []struct {
		name string
		cfg  daemonConfig
		ip   bool
	}{
		{"head", daemonConfig{Head: true, GCSAddr: "10.1.230.180:6379", Dashboard: true, DashboardHost: "127.0.0.1", DashboardPort: 8265, Node: gcs.NodeInfo{NodeIP: "10.1.230.180"}}, false},
		{"head-explicit-ip", daemonConfig{Head: true, GCSAddr: "192.168.200.12:6379", Dashboard: true, DashboardHost: "0.0.0.0", DashboardPort: 8265, Node: gcs.NodeInfo{NodeIP: "192.168.200.12"}}, true},
		{"worker", daemonConfig{GCSAddr: "192.168.200.12:6379", Node: gcs.NodeInfo{NodeIP: "192.168.200.13"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, out, _ := proc(t)
			printStarted(newCLILogger(p, "record"), &tt.cfg, tt.ip)
			golden.Check(t, *update, "ray/started-"+tt.name+".golden", out.String())
		})
	}
}

// A worker whose head is unreachable prints Ray's GCS connection lines for
// each attempt and gives up.
func TestConnectGCSFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	p, _, errb := proc(t)
	tm := hw.DefaultTiming(sim.Env{"SIMNODE_GCS_CONNECT_TIMEOUT": "100ms", "SIMNODE_GCS_RETRIES": "2"})
	if _, err := ConnectGCS(context.Background(), p, addr, tm, gcs.Hello{Role: "client"}, nil); err == nil {
		t.Fatal("ConnectGCS succeeded against a closed port")
	}
	got := errb.String()
	for _, re := range []string{
		`(?m)^\[2026-11-29 23:20:00,123 E 4242 4242\] gcs_rpc_client\.h:179: Failed to connect to GCS at address ` + regexp.QuoteMeta(addr) + ` within 0 seconds\.$`,
		`(?m)^\[2026-11-29 23:20:00,123 W 4242 4242\] gcs_client\.cc:178: Failed to get cluster ID from GCS server: TimedOut: Timed out while waiting for GCS to become available\.$`,
		`(?m)^2026-11-29 23:20:00,123\tWARNING utils\.py:1401 -- Unable to connect to GCS \(ray head\) at ` + regexp.QuoteMeta(addr) + `\. Check that \(1\) Ray with matching version started successfully at the specified address, \(2\) this node can reach the specified address, and \(3\) there is no firewall setting preventing access\.$`,
		`(?m)^ConnectionError: Could not read 'session_name' from GCS\. Did GCS start successfully\?$`,
	} {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("stderr lacks %s\nstderr:\n%s", re, got)
		}
	}
	if n := strings.Count(got, "gcs_rpc_client.h:179"); n != 2 {
		t.Errorf("%d attempts reported, want 2", n)
	}
}

func TestFindAddress(t *testing.T) {
	tests := []struct {
		name     string
		env      sim.Env
		explicit string
		want     string
	}{
		{"explicit", sim.Env{}, "10.0.0.1:6380", "10.0.0.1:6380"},
		{"env without port", sim.Env{"RAY_ADDRESS": "10.0.0.2"}, "", "10.0.0.2:6379"},
		{"nothing", sim.Env{"RAY_TMPDIR": "/nonexistent"}, "", ""},
	}
	for _, tt := range tests {
		if got := FindAddress(tt.env, tt.explicit); got != tt.want {
			t.Errorf("%s: FindAddress = %q, want %q", tt.name, got, tt.want)
		}
	}
}
