package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// This test builds simnode and runs it in two network namespaces shaped like
// the seeds' DGX Spark pair:
//
//	head:   mgmt0 10.1.230.180/24 (default route), enp1s0f1np1 192.168.200.12/24
//	worker: mgmt0 10.1.231.13/24 (no default route), enp1s0f1np1 192.168.200.13/24
//
// The worker cannot reach 10.1.230.180. Each management link is a veth pair
// inside its own namespace; the fabric is one veth pair between the two. No
// link touches the root namespace, and all traffic stays in these namespaces.

const (
	headMgmt   = "10.1.230.180"
	headFabric = "192.168.200.12"
	workFabric = "192.168.200.13"
)

// labHardware is a DGX Spark (one GB10, 119.70 GiB unified) with short
// simulated durations.
const labHardware = `{"gpus":[{"name":"NVIDIA GB10","memory_mib":0}],"memory_mib":122572,"unified_memory":true,
"driver_version":"580.95.05","cuda_version":"13.0","rdma":[{"hca":"rocep1s0f1","port":1,"netdev":"enp1s0f1np1"}],
"timing":{"engine_init":"10ms","weight_load":"100ms","profile_run":"10ms","graph_capture":"400ms","placement_group_timeout":"2s",
"placement_group_wait_interval":"500ms","c10d_timeout":"1s","gcs_connect_timeout":"1s","heartbeat_period":"100ms","heartbeat_timeout":"3s"}}`

type node struct {
	ns  string
	dir string
}

type lab struct {
	t    *testing.T
	bin  string
	head node
	work node
	mu   sync.Mutex
	bg   []*exec.Cmd
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func newLab(t *testing.T) *lab {
	t.Helper()
	if testing.Short() {
		t.Skip("namespace lab skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces (run the tests as root, as CI does)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to create network namespaces")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "simnode"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build simnode: %v\n%s", err, out)
	}
	for _, tool := range []string{"ray", "vllm", "nvidia-smi", "ibdev2netdev"} {
		if err := os.Symlink("simnode", filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	l := &lab{t: t, bin: bin}
	for i, n := range []*node{&l.head, &l.work} {
		n.ns = fmt.Sprintf("rfs-%d-%d", os.Getpid(), i+1)
		n.dir = filepath.Join(dir, fmt.Sprintf("node%d", i+1))
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.dir, "hardware.json"), []byte(labHardware), 0o644); err != nil {
			t.Fatal(err)
		}
		ipCmd(t, "netns", "add", n.ns)
		ns := n.ns
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		ipCmd(t, "-n", n.ns, "link", "set", "lo", "up")
		ipCmd(t, "-n", n.ns, "link", "add", "mgmt0", "type", "veth", "peer", "name", "mgmt0p")
		ipCmd(t, "-n", n.ns, "link", "set", "mgmt0p", "up")
		ipCmd(t, "-n", n.ns, "link", "set", "mgmt0", "up")
	}
	ipCmd(t, "-n", l.head.ns, "addr", "add", headMgmt+"/24", "dev", "mgmt0")
	ipCmd(t, "-n", l.head.ns, "route", "add", "default", "via", "10.1.230.1", "dev", "mgmt0")
	ipCmd(t, "-n", l.work.ns, "addr", "add", "10.1.231.13/24", "dev", "mgmt0")
	ipCmd(t, "-n", l.head.ns, "link", "add", "enp1s0f1np1", "type", "veth", "peer", "name", "enp1s0f1np1", "netns", l.work.ns)
	ipCmd(t, "-n", l.head.ns, "addr", "add", headFabric+"/24", "dev", "enp1s0f1np1")
	ipCmd(t, "-n", l.work.ns, "addr", "add", workFabric+"/24", "dev", "enp1s0f1np1")
	ipCmd(t, "-n", l.head.ns, "link", "set", "enp1s0f1np1", "up")
	ipCmd(t, "-n", l.work.ns, "link", "set", "enp1s0f1np1", "up")
	t.Cleanup(l.shutdown)
	return l
}

func (l *lab) env(n node, extra ...string) []string {
	env := []string{
		"PATH=" + l.bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + n.dir,
		"RAY_TMPDIR=" + n.dir,
		"SIMNODE_STATE_DIR=" + n.dir,
		"SIMNODE_HARDWARE=" + filepath.Join(n.dir, "hardware.json"),
		"SIMNODE_TOKENS_PER_SECOND=1000",
		"SIMNODE_GCS_RETRIES=1",
	}
	return append(env, extra...)
}

func (l *lab) command(ctx context.Context, n node, env []string, tool string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.ns, filepath.Join(l.bin, tool)}, args...)...)
	cmd.Env = l.env(n, env...)
	return cmd
}

// run runs a tool to completion and returns its combined output and exit
// status.
func (l *lab) run(n node, env []string, tool string, args ...string) (string, int) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := l.command(ctx, n, env, tool, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		l.t.Fatalf("%s %v: %v", tool, args, err)
	}
	return out.String(), code
}

func (l *lab) mustRun(n node, env []string, tool string, args ...string) string {
	l.t.Helper()
	out, code := l.run(n, env, tool, args...)
	if code != 0 {
		l.t.Fatalf("%s %s exited %d:\n%s", tool, strings.Join(args, " "), code, out)
	}
	return out
}

// background starts a long-running tool; its output accumulates in the
// returned buffer.
func (l *lab) background(n node, env []string, tool string, args ...string) (*exec.Cmd, *syncBuffer) {
	l.t.Helper()
	cmd := l.command(context.Background(), n, env, tool, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.mu.Lock()
	l.bg = append(l.bg, cmd)
	l.mu.Unlock()
	return cmd, out
}

func (l *lab) stopRay() {
	for _, n := range []node{l.work, l.head} {
		cmd := l.command(context.Background(), n, nil, "ray", "stop", "--force", "-g", "5")
		_ = cmd.Run()
	}
}

func (l *lab) shutdown() {
	l.mu.Lock()
	bg := l.bg
	l.mu.Unlock()
	for _, c := range bg {
		if c.Process != nil {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, c := range bg {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	l.stopRay()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitOutput polls the output of a background process for want.
func waitOutput(t *testing.T, cmd *exec.Cmd, out *syncBuffer, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) || (cmd.ProcessState != nil) {
			t.Fatalf("no %q in output:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpIn sends one HTTP request from inside namespace ns: the socket is
// created on a thread that entered the namespace (setns), so the request
// really travels inside the lab.
func httpIn(t *testing.T, ns, method, url, body string) (int, string) {
	t.Helper()
	type result struct {
		code int
		body string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is discarded when this goroutine exits still locked.
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			ch <- result{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		conn, err := net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		if err := req.Write(conn); err != nil {
			ch <- result{err: err}
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			ch <- result{err: err}
			return
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		ch <- result{code: resp.StatusCode, body: b.String()}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("%s %s in %s: %v", method, url, ns, r.err)
	}
	return r.code, r.body
}

type listedNode struct {
	NodeIP    string         `json:"node_ip"`
	IsHead    bool           `json:"is_head_node"`
	State     string         `json:"state"`
	Resources map[string]any `json:"resources_total"`
}

func (l *lab) listNodes() []listedNode {
	l.t.Helper()
	out := l.mustRun(l.head, nil, "ray", "list", "nodes", "--format", "json")
	var nodes []listedNode
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		l.t.Fatalf("ray list nodes: %v\n%s", err, out)
	}
	return nodes
}

func requireContains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestLab(t *testing.T) {
	l := newLab(t)
	fabricEnv := func(ip string) []string {
		return []string{"VLLM_HOST_IP=" + ip, "NCCL_SOCKET_IFNAME=enp1s0f1np1", "GLOO_SOCKET_IFNAME=enp1s0f1np1"}
	}
	startFabric := func(t *testing.T, extra ...string) {
		t.Helper()
		l.stopRay()
		l.mustRun(l.head, append(fabricEnv(headFabric), extra...), "ray", "start", "--head", "--node-ip-address", headFabric, "--port", "6379", "--disable-usage-stats")
		l.mustRun(l.work, append(fabricEnv(workFabric), extra...), "ray", "start", "--address", headFabric+":6379", "--node-ip-address", workFabric)
	}
	serveArgs := func(util string) []string {
		return []string{"serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--tensor-parallel-size", "2", "--distributed-executor-backend", "ray", "--gpu-memory-utilization", util, "--max-model-len", "32768", "--served-model-name", "qwen", "--port", "8000"}
	}

	t.Run("auto-detected head IP is unreachable for c10d", func(t *testing.T) {
		l.stopRay()
		out := l.mustRun(l.head, nil, "ray", "start", "--head", "--port", "6379", "--disable-usage-stats")
		requireContains(t, out, "Local node IP: "+headMgmt, "Ray runtime started.", "ray start --address='"+headMgmt+":6379'")
		out = l.mustRun(l.work, nil, "ray", "start", "--address", headFabric+":6379")
		requireContains(t, out, "Local node IP: "+workFabric, "Ray runtime started.")
		ips := map[string]bool{}
		for _, n := range l.listNodes() {
			ips[n.NodeIP] = n.State == "ALIVE"
		}
		if !ips[headMgmt] || !ips[workFabric] || len(ips) != 2 {
			t.Fatalf("nodes %v, want %s and %s ALIVE", ips, headMgmt, workFabric)
		}
		out, code := l.run(l.head, nil, "vllm", serveArgs("0.80")...)
		if code == 0 {
			t.Fatalf("vllm serve succeeded; output:\n%s", out)
		}
		requireContains(t, out,
			"(RayWorkerWrapper pid=", "ip="+workFabric+")",
			"socket.cpp:818] [c10d] The client socket has failed to connect to any network address of ("+headMgmt+", ",
			"(errno: 101 - Network is unreachable)",
			"TCPStore.cpp:328] [c10d] TCP client failed to connect/validate to host "+headMgmt+":",
			"torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of ("+headMgmt+", ",
			"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
	})

	t.Run("fabric addresses serve", func(t *testing.T) {
		startFabric(t)
		nodes := l.listNodes()
		if len(nodes) != 2 {
			t.Fatalf("%d nodes, want 2: %+v", len(nodes), nodes)
		}
		for _, n := range nodes {
			if n.State != "ALIVE" || !strings.HasPrefix(n.NodeIP, "192.168.200.") || n.Resources["GPU"] != 1.0 {
				t.Errorf("node %+v: want ALIVE on 192.168.200.x with GPU 1.0", n)
			}
		}
		cmd, out := l.background(l.head, fabricEnv(headFabric), "vllm", serveArgs("0.80")...)
		waitOutput(t, cmd, out, "Application startup complete.", 30*time.Second)
		code, body := httpIn(t, l.head.ns, "GET", "http://127.0.0.1:8000/health", "")
		if code != 200 || body != "" {
			t.Errorf("/health = %d %q", code, body)
		}
		code, body = httpIn(t, l.head.ns, "POST", "http://"+headFabric+":8000/v1/completions", `{"model":"qwen","prompt":"Hello","max_tokens":4}`)
		if code != 200 || !strings.Contains(body, `"completion_tokens":4`) {
			t.Errorf("/v1/completions = %d %s", code, body)
		}
		requireContains(t, out.String(), "NCCL", "Uvicorn running on http://0.0.0.0:8000")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})

	t.Run("memory monitor kills graph capture at 0.90", func(t *testing.T) {
		startFabric(t, "RAY_memory_monitor_refresh_ms=20")
		out, code := l.run(l.head, fabricEnv(headFabric), "vllm", serveArgs("0.90")...)
		if code == 0 {
			t.Fatalf("vllm serve succeeded; output:\n%s", out)
		}
		requireContains(t, out,
			"Capturing CUDA graphs",
			"ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
			"was 113.78GB / 119.70GB (0.950543), which exceeds the memory usage threshold of 0.95.",
			"(raylet) ", "Workers (tasks / actors) killed due to memory pressure (OOM)",
			"RuntimeError: Engine core initialization failed.")
	})

	t.Run("memory monitor disabled serves at 0.90", func(t *testing.T) {
		startFabric(t, "RAY_memory_monitor_refresh_ms=0")
		cmd, out := l.background(l.head, fabricEnv(headFabric), "vllm", serveArgs("0.90")...)
		waitOutput(t, cmd, out, "Application startup complete.", 30*time.Second)
		if code, _ := httpIn(t, l.head.ns, "GET", "http://127.0.0.1:8000/v1/models", ""); code != 200 {
			t.Errorf("/v1/models = %d", code)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})

	t.Run("NCCL_SOCKET_IFNAME names a missing interface", func(t *testing.T) {
		startFabric(t)
		env := append(fabricEnv(headFabric), "NCCL_SOCKET_IFNAME=eth9", "NCCL_DEBUG=WARN")
		out, code := l.run(l.head, env, "vllm", serveArgs("0.80")...)
		if code == 0 {
			t.Fatalf("vllm serve succeeded; output:\n%s", out)
		}
		requireContains(t, out,
			"NCCL WARN Bootstrap : no socket interface found",
			"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3135, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9",
			"RuntimeError: Engine core initialization failed.")
	})
}
