package raycli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// rayRoot is Ray's temp root: --temp-dir, else $RAY_TMPDIR/ray, else
// $TMPDIR/ray, else /tmp/ray (ray._private.utils.get_user_temp_dir).
func rayRoot(env sim.Env, tempDir string) string {
	if tempDir != "" {
		return tempDir
	}
	base := env.Get("RAY_TMPDIR")
	if base == "" {
		base = env.Get("TMPDIR")
	}
	if base == "" {
		base = "/tmp"
	}
	return filepath.Join(base, "ray")
}

// currentClusterFile is where `ray start` records the GCS address and `ray
// status`, `ray list` and drivers find it.
func currentClusterFile(root string) string { return filepath.Join(root, "ray_current_cluster") }

// readCurrentCluster returns the recorded GCS address ("" when none).
func readCurrentCluster(root string) string {
	b, err := os.ReadFile(currentClusterFile(root))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// FindAddress resolves the GCS address for clients (ray status, vLLM's
// ray.init): explicit address, then RAY_ADDRESS, then ray_current_cluster.
// "auto" means "from ray_current_cluster".
func FindAddress(env sim.Env, explicit string) string {
	addr := explicit
	if addr == "" {
		addr = env.Get("RAY_ADDRESS")
	}
	if addr == "" || addr == "auto" {
		return readCurrentCluster(rayRoot(env, ""))
	}
	addr = strings.TrimPrefix(addr, "ray://")
	if !strings.Contains(addr, ":") {
		addr += ":6379"
	}
	return addr
}

// sessionName is Ray's session directory name for a start at t by pid.
func sessionName(t time.Time, pid int) string {
	return fmt.Sprintf("session_%s_%06d_%d", t.Format("2006-01-02_15-04-05"), t.Nanosecond()/1000, pid)
}

// makeSession creates <root>/<name>/logs and points session_latest at it.
func makeSession(root, name string) (string, error) {
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return "", fmt.Errorf("create session dir: %w", err)
	}
	latest := filepath.Join(root, "session_latest")
	_ = os.Remove(latest)
	if err := os.Symlink(name, latest); err != nil {
		return "", fmt.Errorf("link session_latest: %w", err)
	}
	return dir, nil
}

// canonicalAddress resolves host:port (host names to IPv4).
func canonicalAddress(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if _, err := strconv.Atoi(port); err != nil {
		return "", fmt.Errorf("bad port %q", port)
	}
	if net.ParseIP(host) == nil {
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", host)
		if err != nil || len(ips) == 0 {
			return "", errors.New("cannot resolve " + host)
		}
		host = ips[0].String()
	}
	return net.JoinHostPort(host, port), nil
}
