package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rayform/rayform/engine/transport"
)

func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// mustJSON renders v as indented JSON for goldens and diffs.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// diffJSON returns "" when a and b render to the same JSON, else both.
func diffJSON(a, b any) string {
	ja, _ := json.MarshalIndent(a, "", "  ")
	jb, _ := json.MarshalIndent(b, "", "  ")
	if bytes.Equal(ja, jb) {
		return ""
	}
	return fmt.Sprintf("first:\n%s\nsecond:\n%s", ja, jb)
}

// fixture reads testdata/observe/name.
func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// out builds probe output the way the probe's rf_sec frames it.
type out struct{ b strings.Builder }

func newOut() *out {
	o := &out{}
	o.b.WriteString(marker + " probe 1\n")
	return o
}

// sec adds a section: stdout verbatim, then stderr (trailing newlines
// dropped, as a command substitution does) and the exit code.
func (o *out) sec(name, stdout, stderr string, rc int) *out {
	fmt.Fprintf(&o.b, "%s begin %s\n%s\n%s stderr\n%s\n%s end %d\n",
		marker, name, stdout, marker, strings.TrimRight(stderr, "\n"), marker, rc)
	return o
}

func (o *out) skip(name, reason string) *out {
	fmt.Fprintf(&o.b, "%s begin %s\n%s skip %s\n", marker, name, marker, reason)
	return o
}

func (o *out) done() []byte {
	return []byte(o.b.String() + marker + " done\n")
}

// cannedConn answers every command with a fixed output (or error), like a
// host whose probe prints the same thing every time.
type cannedConn struct {
	host   string
	reply  func(cmd transport.Cmd) (transport.Result, error)
	mu     sync.Mutex
	rounds int
}

func (c *cannedConn) Host() string { return c.host }

func (c *cannedConn) Run(ctx context.Context, cmd transport.Cmd) (transport.Result, error) {
	c.mu.Lock()
	c.rounds++
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return transport.Result{}, err
	}
	return c.reply(cmd)
}

func (c *cannedConn) Upload(context.Context, string, []byte, uint32) error {
	return errors.New("cannedConn: upload not supported")
}

func (c *cannedConn) Stats() transport.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return transport.Stats{Handshakes: 1, RoundTrips: c.rounds}
}

func (c *cannedConn) Close() error { return nil }

// guardConn fails the test for any mutating command or upload and records
// every command it passes on, so tests can assert observe is read-only and
// golden the exact commands it issued.
type guardConn struct {
	t     testing.TB
	inner transport.Conn
	mu    sync.Mutex
	cmds  []transport.Cmd
}

func (g *guardConn) Host() string { return g.inner.Host() }

func (g *guardConn) Run(ctx context.Context, cmd transport.Cmd) (transport.Result, error) {
	if cmd.Mutating {
		g.t.Errorf("%s: observe issued a mutating command: %s", g.Host(), cmd)
	}
	if len(cmd.Argv) > 0 || cmd.Stdin != nil || len(cmd.Env) > 0 {
		g.t.Errorf("%s: observe command uses argv/stdin/env, want a plain script: %+v", g.Host(), cmd)
	}
	g.mu.Lock()
	g.cmds = append(g.cmds, cmd)
	g.mu.Unlock()
	return g.inner.Run(ctx, cmd)
}

func (g *guardConn) Upload(context.Context, string, []byte, uint32) error {
	g.t.Errorf("%s: observe uploaded a file", g.Host())
	return transport.ErrReadOnly
}

func (g *guardConn) Stats() transport.Stats { return g.inner.Stats() }
func (g *guardConn) Close() error           { return g.inner.Close() }

func (g *guardConn) commands() []transport.Cmd {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]transport.Cmd(nil), g.cmds...)
}

// The URLs the tests' head specs probe: Ray's dashboard and one vLLM.
const (
	testDashURL    = "http://127.0.0.1:8265/api/v0/nodes?limit=1000"
	testHealthURL  = "http://127.0.0.1:8000/health"
	testModelsURL  = "http://127.0.0.1:8000/v1/models"
	testHeadName   = "rayform-ray-head"
	testRecordsDir = "/tmp/rayform/serve"
)

// headProbes are the HTTP probes a head asks for (as resources builds
// them): Ray's node table (with ray list nodes in container as the
// fallback) and one vLLM's /health and /v1/models, on dashPort and
// servePort.
func headProbes(container string, dashPort, servePort int) []HTTPProbe {
	base := "http://127.0.0.1:" + strconv.Itoa(servePort)
	return []HTTPProbe{
		{URL: "http://127.0.0.1:" + strconv.Itoa(dashPort) + "/api/v0/nodes?limit=1000", Owner: container,
			Fallback: []string{"ray", "list", "nodes", "--format", "json", "--limit", "1000"}},
		{URL: base + "/health", Owner: container},
		{URL: base + "/v1/models", Owner: container},
	}
}

// tableOf, healthOf and modelsOf read the head's answers (of the one node
// table, /health and /v1/models a test probes, whatever their ports); the
// kinds that asked for them parse their bodies (resources/cluster,
// resources/serve).
func tableOf(f *HostFacts) HTTPResult {
	r, _ := answerAt(f, "/api/v0/nodes?limit=1000")
	return r
}

func healthOf(f *HostFacts) HTTPResult {
	r, _ := answerAt(f, "/health")
	return r
}

func modelsOf(f *HostFacts) HTTPResult {
	r, _ := answerAt(f, "/v1/models")
	return r
}

func answerAt(f *HostFacts, path string) (HTTPResult, bool) {
	for u, r := range f.HTTP {
		if strings.HasSuffix(u, path) {
			return r, true
		}
	}
	return HTTPResult{}, false
}

// testEnvKeys is the allow-list the tests' specs keep the values of, as
// the kinds name theirs (resources/hostplan.EnvKeys).
var testEnvKeys = []string{
	"GLOO_SOCKET_IFNAME",
	"MASTER_ADDR",
	"MASTER_PORT",
	"NCCL_DEBUG",
	"NCCL_IB_DISABLE",
	"NCCL_IB_GID_INDEX",
	"NCCL_IB_HCA",
	"NCCL_SOCKET_IFNAME",
	"OMPI_MCA_btl_tcp_if_include",
	"RAY_ADDRESS",
	"RAY_memory_monitor_refresh_ms",
	"RAY_memory_usage_threshold",
	"TP_SOCKET_IFNAME",
	"UCX_NET_DEVICES",
	"VLLM_CONFIG_ROOT",
	"VLLM_HOST_IP",
	"VLLM_PORT",
}
