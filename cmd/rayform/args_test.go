package main

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseCheckArgs: check's flags become its options, -env pairs its
// environment, the rest the clusters; a malformed -env ends the command.
func TestParseCheckArgs(t *testing.T) {
	var stderr bytes.Buffer
	c := &cli{stderr: &stderr}
	a, _, ok := parseCheckArgs(c, []string{"-json", "-timeout=30s", "-size-mb=8", "-backends=gloo", "-env", "NCCL_IB_HCA=mlx5", "-env", "X=", "spark", "ray_cluster.b"})
	if !ok || !a.run.json || a.opts.Timeout != 30*time.Second || a.opts.SizeMiB != 8 || a.opts.Backends != "gloo" ||
		!maps.Equal(a.opts.Env, map[string]string{"NCCL_IB_HCA": "mlx5", "X": ""}) || !slices.Equal(a.clusters, []string{"spark", "ray_cluster.b"}) {
		t.Errorf("parseCheckArgs = %+v, %v", a, ok)
	}
	if _, code, ok := parseCheckArgs(c, []string{"-env", "=1"}); ok || code != exitError || !strings.Contains(stderr.String(), `-env "=1": want NAME=VALUE`) {
		t.Errorf("-env =1: ok %v, code %d, stderr %q", ok, code, stderr.String())
	}
}

// TestParseLogsArgs: logs takes one address, flags before or after it.
func TestParseLogsArgs(t *testing.T) {
	var stderr bytes.Buffer
	c := &cli{stderr: &stderr}
	a, _, ok := parseLogsArgs(c, []string{"vllm_serve.q", "-f", "-tail=5", "-node", "h1", "-since=10m"})
	if !ok || a.addr != "vllm_serve.q" || !a.follow || a.tail != 5 || a.node != "h1" || a.since != "10m" {
		t.Errorf("parseLogsArgs = %+v, %v", a, ok)
	}
	if a, _, _ := parseLogsArgs(c, []string{"ray_cluster.x"}); a.tail != 100 || a.follow {
		t.Errorf("defaults: %+v", a)
	}
	if _, code, ok := parseLogsArgs(c, nil); ok || code != exitError || !strings.Contains(stderr.String(), "logs takes one argument, a resource address (ray_cluster.NAME or vllm_serve.NAME)") {
		t.Errorf("no address: ok %v, code %d, stderr %q", ok, code, stderr.String())
	}
}

// TestParseUnlockArgs: force-unlock takes one name, and -force.
func TestParseUnlockArgs(t *testing.T) {
	var stderr bytes.Buffer
	c := &cli{stderr: &stderr}
	a, _, ok := parseUnlockArgs(c, []string{"-force", "spark"})
	if !ok || !a.force || a.resource != "spark" {
		t.Errorf("parseUnlockArgs = %+v, %v", a, ok)
	}
	if _, code, ok := parseUnlockArgs(c, []string{"a", "b"}); ok || code != exitError {
		t.Errorf("two names: ok %v, code %d", ok, code)
	}
}
