package diagnose

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/diagnose")

// fixtureDir holds the real-log fixtures and their golden Text() output.
const fixtureDir = "../../testdata/diagnose"

// readFixture parses testdata/diagnose/<name>.log: lines starting with "# "
// are comments (the source of the lines), except "# log: <host> | <source>",
// which starts a new log. Everything else is log text, verbatim.
func readFixture(t testing.TB, name string) []Log {
	t.Helper()
	return readLogFile(t, filepath.Join(fixtureDir, name+".log"))
}

// readLogFile parses a fixture file of readFixture's format at path.
func readLogFile(t testing.TB, path string) []Log {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(path), ".log")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs []Log
	var text []string
	flush := func() {
		if len(logs) > 0 {
			logs[len(logs)-1].Text = []byte(strings.Join(text, "\n") + "\n")
		}
		text = nil
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if h, ok := strings.CutPrefix(l, "# log: "); ok {
			flush()
			host, source, _ := strings.Cut(h, " | ")
			logs = append(logs, Log{Host: strings.TrimSpace(host), Source: strings.TrimSpace(source)})
			continue
		}
		if strings.HasPrefix(l, "# ") {
			continue
		}
		text = append(text, l)
	}
	flush()
	if len(logs) == 0 {
		t.Fatalf("%s.log: no \"# log:\" header", name)
	}
	return logs
}

// sparkCtx is the seeds' topology: two DGX Sparks, a management network
// (default route, SSH) and the RoCE fabric, unified memory.
func sparkCtx() Context {
	return Context{
		FabricCIDR:           netip.MustParsePrefix("192.168.200.0/24"),
		FabricInterface:      "enp1s0f1np1",
		NodeAddrs:            map[string]string{"spark1": "192.168.200.12", "spark2": "192.168.200.13"},
		MgmtAddrs:            map[string]string{"spark1": "10.1.230.180", "spark2": "10.1.230.181"},
		HeadNode:             "spark1",
		MemoryMonitorOn:      true,
		UnifiedMemory:        true,
		GPUMemoryUtilization: 0.9,
		Image:                "hellohal2064/vllm-qwen3.5-gb10",
		Cluster:              "ray_cluster.main",
		Network:              "network.fabric",
		Serve:                "vllm_serve.qwen",
	}
}

// with returns c changed by f.
func with(c Context, f func(*Context)) Context {
	f(&c)
	return c
}

// discreteCtx is one H100-class server, no fabric declared.
func discreteCtx() Context {
	return Context{
		NodeAddrs:            map[string]string{"gpu1": "10.0.62.231"},
		HeadNode:             "gpu1",
		MemoryMonitorOn:      true,
		GPUMemoryUtilization: 0.9,
		Image:                "vllm/vllm-openai:v0.17.1",
		Cluster:              "ray_cluster.main",
		Network:              "network.fabric",
		Serve:                "vllm_serve.llama",
	}
}

// fixtureCase is one real-log fixture with the context it is read in.
type fixtureCase struct {
	name    string  // golden file name
	fixture string  // testdata/diagnose/<fixture>.log
	ctx     Context // what rayform knows
	cause   Cause   // expected root cause
	// noEvidence: the logs hold nothing that can be evidence (frames only).
	noEvidence bool
	also       []Cause  // expected consequences
	want       []string // substrings the rendered text must contain
}

func fixtureCases() []fixtureCase {
	spark := sparkCtx()
	return []fixtureCase{
		{
			name: "c10d-unreachable", fixture: "c10d-unreachable", ctx: spark, cause: C10dUnreachable,
			want: []string{"10.1.230.180:55053 is unreachable from spark2", "outside the fabric 192.168.200.0/24: it is spark1's management address",
				"network = network.fabric on ray_cluster.main", "ray start --head --node-ip-address=192.168.200.12; VLLM_HOST_IP=192.168.200.12",
				"ray start --address=192.168.200.12:6379 --node-ip-address=192.168.200.13"},
		},
		{
			name: "c10d-unreachable-worker", fixture: "c10d-unreachable-worker", ctx: spark, cause: C10dUnreachable,
			want: []string{"10.1.230.180:29511 is unreachable from spark2", "errno 101: Network is unreachable", "spark1's management address"},
		},
		{
			name: "c10d-unreachable-inside-fabric", fixture: "c10d-unreachable-worker",
			ctx: with(spark, func(c *Context) {
				c.FabricCIDR = netip.MustParsePrefix("10.1.230.0/24")
				c.NodeAddrs = map[string]string{"spark1": "10.1.230.180", "spark2": "10.1.230.181"}
				c.MgmtAddrs = map[string]string{"spark1": "172.16.0.1", "spark2": "172.16.0.2"}
			}),
			cause: C10dUnreachable,
			want:  []string{"inside the fabric 10.1.230.0/24 (spark1's fabric address)", "no route", "ping 10.1.230.180"},
		},
		{
			name: "c10d-refused-after-exit", fixture: "c10d-refused-after-exit", ctx: spark, cause: C10dUnreachable,
			want: []string{"192.168.200.12:33501", "inside the fabric 192.168.200.0/24", "the master process had already exited"},
		},
		{
			name: "placement-group", fixture: "placement-group", cause: PlacementGroup,
			ctx: Context{
				FabricCIDR: netip.MustParsePrefix("192.168.100.0/24"),
				NodeAddrs:  map[string]string{"gpu1": "192.168.100.1", "gpu2": "192.168.100.2"},
				MgmtAddrs:  map[string]string{"gpu1": "10.163.194.101", "gpu2": "10.163.194.102"},
				HeadNode:   "gpu1", Cluster: "ray_cluster.main", Network: "network.fabric", Serve: "vllm_serve.qwen",
			},
			want: []string{"node:10.163.194.101", "30 s so far", "gpu1's management address", "VLLM_HOST_IP=192.168.100.1"},
		},
		{
			name: "placement-group-fabric-ip", fixture: "placement-group", cause: PlacementGroup,
			ctx: Context{
				FabricCIDR: netip.MustParsePrefix("10.163.194.0/24"),
				NodeAddrs:  map[string]string{"gpu1": "10.163.194.101", "gpu2": "10.163.194.102"},
				MgmtAddrs:  map[string]string{"gpu1": "172.16.0.1", "gpu2": "172.16.0.2"},
				HeadNode:   "gpu1", Cluster: "ray_cluster.main", Network: "network.fabric",
			},
			want: []string{"gpu1's fabric address (VLLM_HOST_IP)", "management address 172.16.0.1", "--node-ip-address=10.163.194.101"},
		},
		{
			name: "ray-oom", fixture: "ray-oom", cause: RayOOM, also: []Cause{EngineCore},
			ctx: with(spark, func(c *Context) {
				c.FabricCIDR = netip.MustParsePrefix("10.10.10.0/24")
				c.NodeAddrs = map[string]string{"spark1": "10.10.10.1", "spark2": "10.10.10.2"}
				c.GPUMemoryUtilization = 0.85
			}),
			want: []string{"spark1 (10.10.10.1) at 109.73 GB / 121.63 GB (90.2%, threshold 90.0%)", "memory_monitor = false on ray_cluster.main",
				"RAY_memory_monitor_refresh_ms=0", "from 0.85 to 0.79"},
		},
		{
			name: "ray-oom-discrete", fixture: "ray-oom-task", ctx: discreteCtx(), cause: RayOOM,
			want: []string{"gpu1 (10.0.62.231) at 27.71 GB / 28.80 GB (96.2%, threshold 95.0%)", "Host RAM ran out", "--object-store-memory"},
		},
		{
			name: "ray-oom-monitor-off", fixture: "ray-oom", cause: RayOOM, also: []Cause{EngineCore},
			ctx: with(spark, func(c *Context) {
				c.MemoryMonitorOn = false
				c.NodeAddrs = map[string]string{"spark1": "10.10.10.1", "spark2": "10.10.10.2"}
			}),
			want: []string{"did not reach the raylet on spark1", "Recreate the Ray containers of ray_cluster.main"},
		},
		{
			name: "cuda-oom", fixture: "cuda-oom", ctx: discreteCtx(), cause: CUDAOOM,
			want: []string{"allocating 74.16 GiB", "GPU 0 has 44.40 GiB, of which 29.89 GiB was free", "pid 2684311"},
		},
		{
			name: "free-memory", fixture: "free-memory", ctx: with(discreteCtx(), func(c *Context) { c.GPUMemoryUtilization = 0.95 }),
			cause: FreeMemory, also: []Cause{EngineCore},
			want: []string{"45.01 GiB free", "only 31.44 of 47.38 GiB", "15.94 GiB is held by something else", "from 0.95 to at most 0.64"},
		},
		{
			name: "free-memory-uma", fixture: "free-memory-uma", ctx: with(spark, func(c *Context) { c.GPUMemoryUtilization = 0.08 }), cause: FreeMemory,
			want: []string{"9.73 GiB free on cuda:0", "page cache", "Free the memory first", "drop_caches"},
		},
		{
			name: "nccl-interface", fixture: "nccl-interface", ctx: spark, cause: NCCLInterface, also: []Cause{NCCLPeer, "nccl-invalid-usage"},
			want: []string{"NCCL_SOCKET_IFNAME=eth9 matches no interface on spark1", "fabric interface is enp1s0f1np1", "NCCL_SOCKET_IFNAME=enp1s0f1np1"},
		},
		{
			name: "gloo-interface", fixture: "gloo-interface", ctx: spark, cause: GlooInterface,
			want: []string{"GLOO_SOCKET_IFNAME=eth9 matches no interface on spark2", "GLOO_SOCKET_IFNAME=enp1s0f1np1"},
		},
		{
			name: "ray-missing", fixture: "ray-missing", ctx: spark, cause: RayMissing,
			want: []string{"hellohal2064/vllm-qwen3.5-gb10 has no Ray on spark1", "FROM hellohal2064/vllm-qwen3.5-gb10", "pip install 'ray[default]'"},
		},
		{
			name: "gcs-unreachable", fixture: "gcs-unreachable", cause: GCSUnreachable,
			ctx: with(spark, func(c *Context) {
				c.MgmtAddrs = map[string]string{"spark1": "172.23.15.13", "spark2": "172.23.15.14"}
				c.RayPort = 20000
			}),
			want: []string{"on spark2 cannot reach the GCS at 172.23.15.13:20000", "spark1's management address", "ray start --address=192.168.200.12:20000 --node-ip-address=192.168.200.13"},
		},
		{
			name: "gcs-unreachable-fabric", fixture: "gcs-unreachable-fabric", cause: GCSUnreachable,
			ctx: Context{
				FabricCIDR: netip.MustParsePrefix("172.16.11.0/24"),
				NodeAddrs:  map[string]string{"node1": "172.16.11.65", "node2": "172.16.11.39"},
				HeadNode:   "node1", RayPort: 41000,
			},
			want: []string{"172.16.11.65:41000", "inside the fabric 172.16.11.0/24", "Local node IP", "ss -ltn"},
		},
		{
			name: "image-pull-denied", fixture: "image-pull-denied", ctx: spark, cause: ImagePull,
			want: []string{"cannot pull docwhat/image-gallery on spark1", "docker login", "docker manifest inspect docwhat/image-gallery:latest"},
		},
		{
			name: "image-pull-registry", fixture: "image-pull-registry", ctx: spark, cause: ImagePull,
			want: []string{"registry registry-1.docker.io is unreachable on spark2 (connection refused)", "docker save hello-world:latest | ssh spark2 docker load"},
		},
		{
			name: "gpu-runtime", fixture: "gpu-runtime", ctx: spark, cause: GPURuntime,
			want: []string{"docker on spark2 cannot give the container a GPU", "nvidia-ctk runtime configure --runtime=docker"},
		},
		{
			name: "engine-core-failed", fixture: "engine-core-failed", ctx: spark, cause: EngineCore,
			want: []string{"engine core failed to start on spark1", "RuntimeError: Engine core initialization failed"},
		},
		{
			name: "model-arch-unsupported", fixture: "model-arch-unsupported", ctx: with(spark, func(c *Context) { c.VLLMVersion = "0.14.1" }), cause: ArchUnsupported,
			want: []string{"vLLM 0.14.1 in hellohal2064/vllm-qwen3.5-gb10 on spark1 cannot load the model's architecture ['Qwen2_5_VLForConditionalGeneration']", "failed to be inspected", "vllm --version"},
		},
		{
			name: "unknown", fixture: "unknown", ctx: discreteCtx(), cause: Unknown,
			want: []string{"no known failure pattern in the logs of gpu1", "EngineCore exiting.", "destroy_process_group() was not called"},
		},
		{
			name: "unknown-frames-only", fixture: "unknown-frames-only", ctx: spark, cause: Unknown, noEvidence: true,
			want: []string{"only stack frames", "frame #13"},
		},
		{
			name: "nccl-peer-lost", fixture: "nccl-peer-lost", ctx: spark, cause: NCCLPeer,
			want: []string{"rank 1 on spark2 lost rank 0 while setting up NCCL: rank 0 on spark1 exited first", "Failed to recv, got 0 bytes", "rank 0's log on spark1"},
		},
		{
			name: "nccl-peer-timeout", fixture: "nccl-peer-timeout", ctx: spark, cause: NCCLPeer,
			want: []string{"rank 1 on spark2 timed out waiting for rank 0's NCCL id", "wait timeout after 600000ms"},
		},
		{
			name: "unrecognized-arguments", fixture: "unrecognized-arguments", ctx: with(spark, func(c *Context) { c.VLLMVersion = "0.15.0" }), cause: VLLMArgs,
			want: []string{"vLLM 0.15.0 in hellohal2064/vllm-qwen3.5-gb10 on spark1 does not know --temperature", "Remove or rename --temperature in extra_args on vllm_serve.qwen"},
		},
		{
			name: "address-in-use", fixture: "address-in-use", ctx: with(spark, func(c *Context) { c.PortHolders = map[int]string{8000: "pid 4121 (python3, an earlier vllm serve)"} }), cause: AddrInUse,
			want: []string{"port 8000 is already in use on spark1", "held by pid 4121 (python3, an earlier vllm serve)", "choose another port on vllm_serve.qwen"},
		},
		{
			name: "address-in-use-unprobed", fixture: "address-in-use", ctx: spark, cause: AddrInUse,
			want: []string{"port 8000 is already in use on spark1", "ss -ltnp 'sport = :8000'"},
		},
		{
			name: "serve-killed", fixture: "serve-killed", ctx: discreteCtx(), cause: ServeKilled,
			want: []string{"vllm serve on gpu1 was stopped from outside (SIGTERM)", "KeyboardInterrupt: terminated", "docker events"},
		},
		{
			name: "serve-killed-silently", fixture: "unknown", ctx: with(discreteCtx(), func(c *Context) { c.ProcessExited = true }), cause: ServeKilled,
			want: []string{"disappeared without an error: it was killed (SIGKILL)", "dmesg"},
		},
		{
			name: "ready-timeout", fixture: "ready-timeout", ctx: with(spark, func(c *Context) { c.ReadyTimeout = 10 * time.Minute }), cause: ReadyTimeout,
			want: []string{"was still starting when ready_timeout (10m0s) ran out", "21% Completed | 3/14", "Raise ready_timeout on vllm_serve.qwen"},
		},
		{
			name: "ready-timeout-then-stopped", fixture: "serve-killed", ctx: with(discreteCtx(), func(c *Context) { c.ReadyTimeout = 5 * time.Minute }), cause: ReadyTimeout,
			want: []string{"was still starting when ready_timeout (5m0s) ran out", "100% Completed | 4/4"},
		},
		{
			name: "ray-oom-actor", fixture: "ray-oom-actor", ctx: discreteCtx(), cause: RayOOM,
			want: []string{"169.254.181.2 at 12.49 GB / 13.15 GB (95.0%, threshold 95.0%)", "Host RAM ran out"},
		},
		{
			name: "ray-oom-raylet", fixture: "ray-oom-raylet", ctx: Context{}, cause: RayOOM,
			want: []string{"killed a worker on 10.95.143.76", "RAY_memory_usage_threshold", "in the environment of `ray start`"},
		},
		{
			name: "tp-heads", fixture: "tp-heads", ctx: discreteCtx(), cause: TPHeads,
			want: []string{"tensor_parallel_size 3 does not divide the model's 52 attention heads", "(1, 2, 4, 13, 26, 52)", "tensor_parallel_size = 1, pipeline_parallel_size = 3"},
		},
		{
			name: "tp-heads-12", fixture: "tp-heads-12", ctx: Context{}, cause: TPHeads,
			want: []string{"tensor_parallel_size 8 does not divide the model's 12 attention heads", "12 % 8 = 4", "tensor_parallel_size = 4, pipeline_parallel_size = 2"},
		},
		{
			name: "model-type-unknown", fixture: "model-type-unknown", ctx: discreteCtx(), cause: ModelTypeUnknown,
			want: []string{"the transformers in vllm/vllm-openai:v0.17.1 on gpu1 does not know the model type openvla", "--trust-remote-code", "import transformers"},
		},
		{
			name: "model-type-unknown-qwen3-moe", fixture: "model-type-unknown-qwen3-moe", ctx: Context{}, cause: ModelTypeUnknown,
			want: []string{"does not know the model type qwen3_moe", "docker run --rm --entrypoint python3 <image>"},
		},
		{
			name: "hf-gated", fixture: "hf-gated", ctx: discreteCtx(), cause: HFAccess,
			want: []string{"refused the gated repository mistralai/Mistral-7B-Instruct-v0.2", "No valid token was sent", "env[\"HF_TOKEN\"] of ray_cluster.main", "hf auth whoami"},
		},
		{
			name: "hf-gated-no-access", fixture: "hf-gated-no-access", ctx: Context{}, cause: HFAccess,
			want: []string{"refused the gated repository black-forest-labs/FLUX.1-dev", "Request access on https://huggingface.co/black-forest-labs/FLUX.1-dev"},
		},
		{
			name: "hf-gated-403", fixture: "hf-gated-403", ctx: Context{}, cause: HFAccess,
			want: []string{"refused the gated repository google/gemma-3-4b-pt", "valid, but its account has not been granted access (HTTP 403)", "403 Client Error"},
		},
		{
			name: "hf-repo-not-found", fixture: "hf-repo-not-found", ctx: discreteCtx(), cause: HFAccess,
			want: []string{"no repository Qwen/Qwen3.5-27B-AWQ visible", "does not reveal which", "Check the model name on vllm_serve.llama"},
		},
		{
			name: "hf-repo-not-found-no-namespace", fixture: "hf-repo-not-found-no-namespace", ctx: Context{}, cause: HFAccess,
			want: []string{"no repository vicuna-13b-v1.3 visible", "has no namespace (owner/name)"},
		},
		{
			name: "nccl-system-error", fixture: "nccl-system-error", ctx: discreteCtx(), cause: NCCLSystem,
			want: []string{"NCCL failed a system call on gpu2", "NCCL_DEBUG=INFO", "rayform does not guess", "env on ray_cluster.main"},
		},
		{
			name: "nccl-system-error-async", fixture: "nccl-system-error-async", ctx: Context{}, cause: NCCLSystem,
			want: []string{"unhandled system error", "NCCL_DEBUG_SUBSYS=INIT,NET", "first \"NCCL WARN\" line"},
		},
		{
			name: "removed-option-reasoning", fixture: "removed-option-reasoning", ctx: with(discreteCtx(), func(c *Context) { c.VLLMVersion = "0.10.0" }), cause: VLLMArgs,
			want: []string{"vLLM 0.10.0 in vllm/vllm-openai:v0.17.1 on gpu1 no longer accepts --enable-reasoning (removed from vLLM)", "--reasoning-parser alone", "vllm-project/vllm/issues/18538"},
		},
		{
			name: "removed-option-task", fixture: "removed-option-task", ctx: Context{}, cause: VLLMArgs,
			want: []string{"does not know --task", "an image older than the option refuses it as well", "If it is at or past the removal", "--runner pooling --convert embed"},
		},
		{
			name: "gloo-loopback", fixture: "gloo-loopback", ctx: sparkCtx(), cause: GlooMesh,
			want: []string{"advertised the loopback address 127.0.1.1", "GLOO_SOCKET_IFNAME=enp1s0f1np1", "getent hosts $(hostname)"},
		},
		{
			name: "gloo-mesh", fixture: "gloo-mesh", ctx: Context{}, cause: GlooMesh,
			want: []string{"Gloo could not connect its ranks into a full mesh", "torch printed no address", "GLOO_SOCKET_IFNAME=<the interface"},
		},
		{
			name: "ray-local-instance", fixture: "ray-local-instance", ctx: Context{}, cause: RayLocal,
			want: []string{"the Ray that vLLM started for itself on node1 has fewer GPUs than it needs", "do not say whether a multi-node cluster was meant",
				"If a Ray cluster is running", "RAY_ADDRESS=<head IP>:6379", "If this is one machine", "The number of required GPUs exceeds"},
		},
		{
			name: "ray-local-instance-cluster", fixture: "ray-local-instance", ctx: sparkCtx(), cause: RayLocal,
			want: []string{"instead of joining the cluster of spark1, spark2", "RAY_ADDRESS=192.168.200.12:6379"},
		},
		{
			name: "ray-local-instance-multinode", fixture: "ray-local-instance-multinode", ctx: Context{}, cause: RayLocal, also: []Cause{PlacementGroup},
			want: []string{"the Ray that vLLM started for itself on head has fewer GPUs than it needs", "ray start --temp-dir",
				"RAY_ADDRESS=<head IP>:6379", "The number of required GPUs exceeds"},
		},
		{
			name: "gloo-loopback-refused", fixture: "gloo-loopback-refused", ctx: Context{}, cause: GlooMesh,
			want: []string{"advertised the loopback address 127.0.1.1; node2 cannot reach it", "(port 3210)", "GLOO_SOCKET_IFNAME=<the interface", "getent hosts $(hostname)"},
		},
		{
			name: "gloo-loopback-fallback", fixture: "gloo-loopback-fallback", ctx: Context{}, cause: GlooMesh,
			want: []string{"Gloo on 10.41.0.8 fell back to the loopback address", "Using the loopback address as fallback", "it did not reach that rank", "GLOO_SOCKET_IFNAME=<the interface"},
		},
		{
			name: "ray-driver-no-gpu", fixture: "ray-driver-no-gpu", ctx: Context{}, cause: RayDriverNoGPU,
			want: []string{"found none of its Ray GPU workers on its own node", "VLLM_HOST_IP, else the default-route address", "ray list nodes"},
		},
		{
			name: "ray-node-gpus-reserved", fixture: "ray-node-gpus-reserved", ctx: Context{}, cause: RayDriverNoGPU,
			want: []string{"the GPUs of 74.10.28.48 are all held by a Ray placement group", "ray list placement-groups"},
		},
		{
			name: "ready-timeout-not-c10d", fixture: "ready-timeout", ctx: spark, cause: Unknown,
			want: []string{"retrying (try=0"},
		},
	}
}

// TestClassifyFixtures classifies every real-log fixture, checks the cause,
// that each evidence line is verbatim from the log at its line number, the
// key parsed facts, and the rendered text against its golden file.
func TestClassifyFixtures(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range fixtureCases() {
		seen[tc.fixture] = true
		t.Run(tc.name, func(t *testing.T) {
			logs := readFixture(t, tc.fixture)
			d := Classify(Input{Logs: logs, Context: tc.ctx})
			if d.Cause != tc.cause {
				t.Fatalf("cause = %q, want %q\n%s", d.Cause, tc.cause, d.Text())
			}
			if !slices.Equal(d.Also, tc.also) {
				t.Errorf("also = %v, want %v", d.Also, tc.also)
			}
			if (len(d.Evidence) == 0) != tc.noEvidence {
				t.Fatalf("%d evidence lines, want none: %v", len(d.Evidence), tc.noEvidence)
			}
			assertVerbatim(t, logs, d.Evidence)
			text := d.Text()
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q:\n%s", w, text)
				}
			}
			if d.Fix == "" || d.Title == "" || d.Explanation == "" {
				t.Errorf("empty field in %+v", d)
			}
			golden(t, tc.name, text)
		})
	}
	// Every fixture on disk is exercised.
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.log"))
	for _, f := range files {
		if n := strings.TrimSuffix(filepath.Base(f), ".log"); !seen[n] {
			t.Errorf("fixture %s.log has no test case", n)
		}
	}
}

// assertVerbatim checks that every evidence line is the log's line at LineNo.
func assertVerbatim(t *testing.T, logs []Log, ev []Evidence) {
	t.Helper()
	for _, e := range ev {
		var log *Log
		for i := range logs {
			if logs[i].Host == e.Host && logs[i].Source == e.Source {
				log = &logs[i]
			}
		}
		if log == nil {
			t.Errorf("evidence from unknown log %q/%q", e.Host, e.Source)
			continue
		}
		lines := strings.Split(string(log.Text), "\n")
		if e.LineNo < 1 || e.LineNo > len(lines) {
			t.Errorf("evidence line number %d out of range 1..%d", e.LineNo, len(lines))
			continue
		}
		got := strings.TrimRight(lines[e.LineNo-1], " \t")
		if cut, ok := strings.CutSuffix(e.Line, " …"); ok && len(got) > maxEvidence && strings.HasPrefix(got, cut) {
			continue // capped at maxEvidence, verbatim up to the cut
		}
		if got != e.Line {
			t.Errorf("evidence at %s:%d is not verbatim:\n got %q\nwant %q", e.Host, e.LineNo, e.Line, got)
		}
	}
}

// golden compares got with testdata/diagnose/<name>.golden (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(fixtureDir, name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden (run go test -update and review the diff):\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// TestPrecedence mixes logs of several failures and checks the root cause
// wins regardless of the order the logs are given in.
func TestPrecedence(t *testing.T) {
	spark := sparkCtx()
	cases := []struct {
		name     string
		fixtures []string
		cause    Cause
		also     []Cause
	}{
		{"c10d beats engine wrapper", []string{"c10d-unreachable", "engine-core-failed"}, C10dUnreachable, []Cause{EngineCore}},
		{"ray oom beats engine wrapper", []string{"ray-oom"}, RayOOM, []Cause{EngineCore}},
		{"free memory beats engine wrapper", []string{"free-memory"}, FreeMemory, []Cause{EngineCore}},
		{"c10d beats placement group", []string{"placement-group", "c10d-unreachable"}, C10dUnreachable, []Cause{PlacementGroup}},
		{"worker join beats placement group", []string{"placement-group", "gcs-unreachable"}, GCSUnreachable, []Cause{PlacementGroup}},
		{"nccl interface beats c10d", []string{"c10d-unreachable-worker", "nccl-interface"}, NCCLInterface, []Cause{C10dUnreachable, NCCLPeer, "nccl-invalid-usage"}},
		{"rank 0's cause beats the peer's lost store", []string{"nccl-peer-lost", "nccl-interface"}, NCCLInterface, []Cause{NCCLPeer, "nccl-invalid-usage"}},
		{"ray oom beats the peer's lost store it caused", []string{"nccl-peer-lost", "ray-oom"}, RayOOM, []Cause{NCCLPeer, EngineCore}},
		{"arguments beat everything that follows", []string{"unrecognized-arguments", "c10d-unreachable"}, VLLMArgs, []Cause{C10dUnreachable}},
		{"image pull beats ray missing", []string{"ray-missing", "image-pull-denied"}, ImagePull, []Cause{RayMissing}},
		{"gpu runtime beats everything", []string{"ray-oom", "c10d-unreachable", "gpu-runtime", "image-pull-registry"}, GPURuntime, []Cause{ImagePull, C10dUnreachable, RayOOM, EngineCore}},
		{"ray missing beats gcs", []string{"gcs-unreachable", "ray-missing"}, RayMissing, []Cause{GCSUnreachable}},
		{"ray oom beats cuda oom", []string{"cuda-oom", "ray-oom"}, RayOOM, []Cause{CUDAOOM, EngineCore}},
		{"cuda oom beats engine wrapper", []string{"engine-core-failed", "cuda-oom"}, CUDAOOM, []Cause{EngineCore}},
		{"ray oom beats the c10d refusal it caused", []string{"c10d-refused-after-exit", "ray-oom"}, RayOOM, []Cause{C10dUnreachable, EngineCore}},
		{"a c10d refusal alone is still c10d", []string{"c10d-refused-after-exit"}, C10dUnreachable, nil},
		{"hub refusal beats engine wrapper", []string{"engine-core-failed", "hf-repo-not-found"}, HFAccess, []Cause{EngineCore}},
		{"tp heads beats engine wrapper", []string{"engine-core-failed", "tp-heads"}, TPHeads, []Cause{EngineCore}},
		{"model type beats engine wrapper", []string{"engine-core-failed", "model-type-unknown"}, ModelTypeUnknown, []Cause{EngineCore}},
		{"local ray beats the placement group it cannot fill", []string{"placement-group", "ray-local-instance"}, RayLocal, []Cause{PlacementGroup}},
		{"gloo loopback beats the c10d refusal", []string{"c10d-refused-after-exit", "gloo-loopback"}, GlooMesh, []Cause{C10dUnreachable}},
		{"ray oom beats the gloo mesh failure it caused", []string{"gloo-mesh", "ray-oom"}, RayOOM, []Cause{GlooMesh, EngineCore}},
		{"nccl interface beats nccl system error", []string{"nccl-system-error", "nccl-interface"}, NCCLInterface, []Cause{NCCLPeer, NCCLSystem, "nccl-invalid-usage"}},
		{"nccl system error beats engine wrapper", []string{"engine-core-failed", "nccl-system-error"}, NCCLSystem, []Cause{EngineCore}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs []Log
			for _, f := range tc.fixtures {
				logs = append(logs, readFixture(t, f)...)
			}
			for _, order := range [][]Log{logs, reversed(logs)} {
				d := Classify(Input{Logs: order, Context: spark})
				if d.Cause != tc.cause {
					t.Errorf("cause = %q, want %q", d.Cause, tc.cause)
				}
				if !slices.Equal(d.Also, tc.also) {
					t.Errorf("also = %v, want %v", d.Also, tc.also)
				}
			}
		})
	}
}

// reversed returns a reversed copy of logs.
func reversed(logs []Log) []Log {
	out := slices.Clone(logs)
	slices.Reverse(out)
	return out
}

// TestPrecedenceOrder pins the documented order of the rules.
func TestPrecedenceOrder(t *testing.T) {
	want := []Cause{GPURuntime, DriverTooOld, CUDAArchUnsupported, ImagePull, RayMissing, VLLMArgs, AddrInUse, HFAccess, ModelTypeUnknown, ArchUnsupported, TPHeads, RayLocal, GCSUnreachable, RayPortUnreachable, RayNodeIPMismatch, NCCLInterface, GlooInterface, GlooMesh, C10dUnreachable,
		NCCLPeer, NCCLNet, NCCLSystem, DuplicateNodeIP, RayDriverNoGPU, PlacementGroup, FreeMemory, RayOOM, CUDAOOM, Signature, ServeKilled, FatalError, EngineCore, ReadyTimeout}
	var got []Cause
	for _, r := range rules() {
		got = append(got, r.cause)
	}
	if !slices.Equal(got, want) {
		t.Errorf("rules order = %v, want %v (update the package doc too)", got, want)
	}
}

// TestVariants classifies single real lines in the forms other versions and
// tools print, one case per form. Lines are verbatim from the named source
// unless marked "constructed".
func TestVariants(t *testing.T) {
	spark := sparkCtx()
	cases := []struct {
		name, source string
		lines        []string
		cause        Cause
		title        string // substring of Title
	}{
		{"c10d timed out", "vllm-project/vllm#6650",
			[]string{"torch.distributed.DistNetworkError: The client socket has timed out after 60s while trying to connect to (10.1.16.222, 29400)."},
			C10dUnreachable, "10.1.16.222:29400"},
		{"c10d old torch", "vllm-project/vllm#2427",
			[]string{"[W socket.cpp:663] [c10d] The client socket has failed to connect to xxx:48247 (errno: 110 - Connection timed out).",
				"[E socket.cpp:719] [c10d] The client socket has failed to connect to any network address of (x.x.x.x, 48247)."},
			C10dUnreachable, "x.x.x.x:48247"},
		{"argparse invalid value", "simnode's golden, in Python argparse's wording (constructed)",
			[]string{"usage: vllm serve [model_tag] [options]", "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'"},
			VLLMArgs, "refused the serve command line: argument --tensor-parallel-size/-tp: invalid int value: 'two'"},
		{"unrecognized on vllm 0.15", "vllm-project/vllm-omni#1364",
			[]string{"usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...", "vllm: error: unrecognized arguments: --omni"},
			VLLMArgs, "does not know --omni"},
		{"unrecognized on vllm 0.8.5", "vllm-project/vllm#18538",
			[]string{"vllm: error: unrecognized arguments: --enable-reasoning --reasoning-parser deepseek_r1"},
			VLLMArgs, "does not know --enable-reasoning, --reasoning-parser"},
		{"python errno 98", "vllm-project/vllm#11617",
			[]string{"OSError: [Errno 98] Address already in use"},
			AddrInUse, "a port is already in use"},
		{"c10d master port in use", "vllm-project/vllm#11617",
			[]string{"RuntimeError: The server socket has failed to listen on any local network address. useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"},
			AddrInUse, "already in use"},
		{"architecture not supported", "constructed from the wording of vLLM registry.py's unsupported-architecture error",
			[]string{"ValueError: Model architectures ['Qwen3_5MoeForConditionalGeneration'] are not supported for now."},
			ArchUnsupported, "['Qwen3_5MoeForConditionalGeneration']"},
		{"c10d store timeout on master", "eugr/spark-vllm-docker#335",
			[]string{"torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined."},
			C10dUnreachable, "1/2 clients joined"},
		{"placement group autoscaler", "eugr/spark-vllm-docker#227 via ray-vllm-facts §1.9",
			[]string{"[autoscaler] Error: No available node types can fulfill resource request {'GPU': 1.0, 'node:192.168.50.192': 0.001}."},
			PlacementGroup, "node:192.168.50.192"},
		{"placement group without node", "gpustack/gpustack#5509",
			[]string{"(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of specs for 150 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node."},
			PlacementGroup, "2 GPU bundles waits"},
		{"placement group timeout", "constructed from the format string in vllm ray_utils.py",
			[]string{"ValueError: Cannot provide a placement group of placement_group_specs=[{'node:10.1.230.180': 0.001, 'GPU': 1.0}, {'GPU': 1.0}] within 1800 seconds. See `ray status` and `ray list nodes` to make sure the cluster has enough resources."},
			PlacementGroup, "timed out for node:10.1.230.180"},
		{"duplicate ip", "constructed from the format string in vllm ray_executor.py",
			[]string{"RuntimeError: Every node should have a unique IP address. Got 2 nodes with node ids ['a', 'b'] and 3 unique IP addresses {'10.1.230.180', '192.168.200.12', '192.168.200.13'}. Please check your network configuration. If you set `VLLM_HOST_IP` environment variable, make sure it is unique for each node."},
			DuplicateNodeIP, "3 addresses for 2 Ray nodes"},
		{"ray oom newer", "ray-vllm-facts §3.7 (Ray docs, third-party note)",
			[]string{"(raylet) Task _map_task failed due to oom. There are infinite oom retries remaining, so the task will be retried. Error: 1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 10.0.50.112, ID: 4cb25bc0...) was 28.62GB / 30.00GB (0.954017), which exceeds the memory usage threshold of 0.950000; Object store memory usage: [...]"},
			RayOOM, "28.62 GB / 30.00 GB (95.4%, threshold 95.0%)"},
		{"ray oom gcs side", "ray-vllm-facts §3.7",
			[]string{"gcs_worker_manager.cc:55: Reporting worker exit, worker id = ..., exit_type = NODE_OUT_OF_MEMORY, exit_detail = Task was killed due to the node running low on memory."},
			RayOOM, "memory monitor killed a worker"},
		{"cuda oom old torch", "vllm-project/vllm#783",
			[]string{"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total capacity; 27.91 GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"},
			CUDAOOM, "allocating 1.63 GiB"},
		{"free memory with device", "a public benchmark note (code index id 69028986412)",
			[]string{"ValueError: Free memory on device cuda:0 (7.34/15.49 GiB) on startup is less than desired GPU memory utilization (0.8, 12.39 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."},
			FreeMemory, "12.39 GiB free on cuda:0"},
		{"ray not found sh", "ai-dynamo/dynamo#14020", []string{"/bin/sh: 1: ray: not found"}, RayMissing, "has no Ray"},
		{"ray module missing", "NVIDIA-NeMo/RL#1375",
			[]string{"(raylet) Traceback (most recent call last):", "(raylet)   File \"/opt/nemo_rl_venv/lib/python3.12/site-packages/ray/_private/workers/default_worker.py\", line 8, in <module>", "(raylet)     import ray", "(raylet) ModuleNotFoundError: No module named 'ray'"},
			RayMissing, "has no Ray"},
		{"ray import warning", "vLLM issue quoted in a public note (code index id 56855166064)",
			[]string{"WARNING 04-22 21:56:34 ray_utils.py:46] Failed to import Ray with ModuleNotFoundError(\"No module named 'ray'\"). For distributed inference, please install Ray with `pip install ray`."},
			RayMissing, "has no Ray"},
		{"ray exec missing", "constructed: runc's message as captured for \"bash\" (code index id 20091238913), with ray",
			[]string{"docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"ray\": executable file not found in $PATH: unknown."},
			RayMissing, "has no Ray"},
		{"gcs loopback", "ray-project/ray#23611",
			[]string{"Local node IP: 127.0.0.1", "2022-03-30 17:22:35,502 WARNING node.py:1465 -- Unable to connect to GCS at 127.0.0.1:6379. Check that (1) Ray GCS with matching version started successfully at the specified address, and (2) there is no firewall setting preventing access."},
			GCSUnreachable, "127.0.0.1:6379"},
		{"gcs empty host", "ModalMinds/MM-EUREKA#54",
			[]string{"+ ray start --address=:6379 --num-gpus 8 --block", "Local node IP: 127.0.0.1", "[2025-07-23 10:05:49,679 W 51000 51000] gcs_rpc_client.h:151: Failed to connect to GCS at address :6379 within 5 seconds.", "[2025-07-23 10:06:19,681 W 51000 51000] gcs_client.cc:183: Failed to get cluster ID from GCS server: TimedOut: Timed out while waiting for GCS to become available."},
			GCSUnreachable, "GCS at :6379"},
		{"manifest unknown", "ivangabriele/dockfish#13",
			[]string{"docker pull ivangabriele/dockfish", "Using default tag: latest", "Error response from daemon: manifest for ivangabriele/dockfish:latest not found: manifest unknown: manifest unknown"},
			ImagePull, "ivangabriele/dockfish:latest does not exist"},
		{"platform missing", "a public README (code index id 37152432710)",
			[]string{"docker: no matching manifest for linux/arm64/v8 in the manifest list entries."},
			ImagePull, "no linux/arm64/v8 variant"},
		{"registry timeout", "moby/moby#37532",
			[]string{"Error response from daemon: Get https://registry-1.docker.io/v2/: net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)"},
			ImagePull, "registry-1.docker.io is unreachable"},
		{"registry dns", "docker/compose#5533",
			[]string{"Error response from daemon: Get https://registry-1.docker.io/v2/: dial tcp: lookup registry-1.docker.io on [::1]:53: read udp [::1]:60341->[::1]:53: read: connection refused"},
			ImagePull, "registry-1.docker.io is unreachable"},
		{"gpu runtime named", "infiniflow/ragflow#9573",
			[]string{"Error response from daemon: could not select device driver \"nvidia\" with capabilities: [[gpu]]"},
			GPURuntime, "no NVIDIA runtime"},
		{"gpu driver not loaded", "ray-project/ray#11418",
			[]string{"docker: Error response from daemon: OCI runtime create failed: container_linux.go:349: starting container process caused \"process_linux.go:449: container init caused \\\"process_linux.go:432: running prestart hook 0 caused \\\\\\\"error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: nvml error: driver not loaded\\\\\\\\n\\\\\\\"\\\"\": unknown."},
			GPURuntime, "driver is not usable"},
		{"nccl silent family", "NVIDIA/nccl#1837 via ray-vllm-facts §1.9",
			[]string{"ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)"},
			NCCLInterface, "no usable socket interface"},
		{"engine dead", "ray-vllm-facts §3.7",
			[]string{"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."},
			EngineCore, "engine core failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Join(tc.lines, "\n") + "\n"
			d := Classify(Input{Logs: []Log{{Host: "spark1", Source: "log", Text: []byte(text)}}, Context: spark})
			if d.Cause != tc.cause {
				t.Fatalf("cause = %q, want %q (source %s)\n%s", d.Cause, tc.cause, tc.source, d.Text())
			}
			if !strings.Contains(d.Title, tc.title) {
				t.Errorf("title %q lacks %q", d.Title, tc.title)
			}
		})
	}
}

// TestEngineCoreShowsContext: with an unrecognised cause above the wrapper,
// the meaningful lines before it are the evidence after the wrapper line.
func TestEngineCoreShowsContext(t *testing.T) {
	var text []byte
	for _, f := range []string{"unknown", "engine-core-failed"} {
		text = append(text, readFixture(t, f)[0].Text...)
	}
	logs := []Log{{Host: "spark1", Source: "vllm serve log", Text: text}}
	d := Classify(Input{Logs: logs, Context: sparkCtx()})
	if d.Cause != EngineCore {
		t.Fatalf("cause = %q", d.Cause)
	}
	assertVerbatim(t, logs, d.Evidence)
	if len(d.Evidence) < 3 || !strings.Contains(d.Evidence[0].Line, "Engine core initialization failed") {
		t.Errorf("evidence = %+v", d.Evidence)
	}
	joined := ""
	for _, e := range d.Evidence {
		joined += e.Line + "\n"
	}
	if !strings.Contains(joined, "destroy_process_group") || strings.Contains(joined, "frame #") {
		t.Errorf("evidence lacks the context line or quotes a stack frame:\n%s", joined)
	}
}

// TestGCSRetrySucceeded: a GCS connection warning followed by Ray's success
// line is a retry, not a failure.
func TestGCSRetrySucceeded(t *testing.T) {
	// Constructed: Ray's own lines (TinyZero#75, ServerlessLLM#311 via
	// ray-vllm-facts §3.1) with the success banner printed by scripts.py.
	log := "2025-11-07 05:43:08,810 INFO scripts.py:1152 -- Local node IP: 192.168.200.13\n" +
		"[2025-02-16 16:05:55,537 E 350061 350061] gcs_rpc_client.h:179: Failed to connect to GCS at address 192.168.200.12:6379 within 5 seconds.\n" +
		"2025-11-07 05:43:10,938 SUCC scripts.py:1168 -- --------------------\n" +
		"2025-11-07 05:43:10,938 SUCC scripts.py:1169 -- Ray runtime started.\n"
	d := Classify(Input{Logs: []Log{{Host: "spark2", Source: "ray worker container", Text: []byte(log)}}, Context: sparkCtx()})
	if d.Cause != Healthy || d.Failure {
		t.Fatalf("cause = %q, want %q", d.Cause, Healthy)
	}
}

// TestUnknownSkipsNoise: the tail of an unrecognised failure keeps the lines
// that say something and drops blanks, progress bars and traceback frames.
func TestUnknownSkipsNoise(t *testing.T) {
	// Progress lines: vLLM's loader format (ray-vllm-facts §3.6), with \r as
	// a terminal writes them; the rest from vllm-project/vllm#19951.
	log := "INFO 02-17 09:29:27 api_server.py:840] vLLM API server version 0.7.2\n" +
		"\n" +
		"Loading safetensors checkpoint shards:   0% Completed | 0/14 [00:00<?, ?it/s]\rLoading safetensors checkpoint shards:   7% Completed | 1/14 [00:04<00:56,  4.38s/it]\n" +
		"Traceback (most recent call last):\n" +
		"  File \"vllm/vllm/engine/arg_utils.py\", line 914, in create_model_config\n" +
		"    return ModelConfig(\n" +
		"           ^^^^^^^^^^^^\n" +
		"   \n" +
		"pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
	// The exception ended the process: it is the fatal error, quoted; the
	// frames and progress bars above it are never evidence.
	d := Classify(Input{Logs: []Log{{Host: "spark1", Source: "vllm serve log", Text: []byte("\x1b[36m" + log)}}})
	if d.Cause != FatalError {
		t.Fatalf("cause = %q", d.Cause)
	}
	var got []string
	for _, e := range d.Evidence {
		got = append(got, e.Line)
	}
	want := []string{
		"pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
	}
	if !slices.Equal(got, want) {
		t.Errorf("evidence = %q, want %q", got, want)
	}
	if d.Evidence[0].LineNo != 9 {
		t.Errorf("line number = %d, want 9", d.Evidence[0].LineNo)
	}
	// Without the exception, the tail of the log is shown, noise left out.
	d = Classify(Input{Logs: []Log{{Host: "spark1", Source: "vllm serve log", Text: []byte("\x1b[36m" + strings.TrimSuffix(log, "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"))}}})
	if d.Cause != Unknown || len(d.Evidence) != 1 || d.Evidence[0].Line != "INFO 02-17 09:29:27 api_server.py:840] vLLM API server version 0.7.2" {
		t.Errorf("cause %q, evidence %+v", d.Cause, d.Evidence)
	}
}

// TestUnknownCapsTail: at most maxTail lines, shared across logs, newest kept.
func TestUnknownCapsTail(t *testing.T) {
	var a, b strings.Builder
	for i := range 40 {
		a.WriteString("head message " + string(rune('A'+i%26)) + strings.Repeat("x", i) + "\n")
		b.WriteString("worker message " + strings.Repeat("y", i) + "\n")
	}
	d := Classify(Input{Logs: []Log{{Host: "spark1", Text: []byte(a.String())}, {Host: "spark2", Text: []byte(b.String())}}})
	if len(d.Evidence) != maxTail {
		t.Fatalf("%d evidence lines, want %d", len(d.Evidence), maxTail)
	}
	last := d.Evidence[len(d.Evidence)-1]
	if last.Host != "spark2" || last.LineNo != 40 {
		t.Errorf("last evidence = %+v, want spark2 line 40", last)
	}
	if d.Evidence[0].Host != "spark1" {
		t.Errorf("first evidence from %s, want spark1", d.Evidence[0].Host)
	}
}

// TestEmptyLogs: nothing to read is its own answer, not a panic.
func TestEmptyLogs(t *testing.T) {
	for _, in := range []Input{{}, {Logs: []Log{{Host: "spark1", Text: []byte("\n\r\n  \n")}}}} {
		d := Classify(in)
		if d.Cause != Unknown || !strings.Contains(d.Title, "no log output") || len(d.Evidence) != 0 {
			t.Errorf("Classify(%+v) = %+v", in, d)
		}
	}
}

// TestRedact checks secret values are hidden and harmless pairs kept.
func TestRedact(t *testing.T) {
	cases := []struct{ in, want string }{
		{"HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456 VLLM_HOST_IP=192.168.200.12", "HF_TOKEN=<redacted> VLLM_HOST_IP=192.168.200.12"},
		{"env: {'HF_TOKEN': 'hf_x1', 'NCCL_SOCKET_IFNAME': 'enp1s0f1np1'}", "env: {'HF_TOKEN': '<redacted>', 'NCCL_SOCKET_IFNAME': 'enp1s0f1np1'}"},
		{`"HUGGING_FACE_HUB_TOKEN": "abc"`, `"HUGGING_FACE_HUB_TOKEN": "<redacted>"`},
		{"AWS_SECRET_ACCESS_KEY=wJalr/K7MDENG RAY_memory_monitor_refresh_ms=0", "AWS_SECRET_ACCESS_KEY=<redacted> RAY_memory_monitor_refresh_ms=0"},
		{"DB_PASSWORD=hunter2", "DB_PASSWORD=<redacted>"},
		{"vllm serve m --hf-token hf_secret --port 8000", "vllm serve m --hf-token <redacted> --port 8000"},
		{"vllm serve m --api-key=sk-123", "vllm serve m --api-key=<redacted>"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x", "Authorization: Bearer <redacted>"},
		{"Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic <redacted>"},
		{"headers={'authorization': 'token ghp_abc'}", "headers={'authorization': 'token <redacted>'}"},
		{"Get https://robot:s3cr3t@registry.lab:5000/v2/", "Get https://robot:<redacted>@registry.lab:5000/v2/"},
		{"token in prose hf_abcdefghijklmnopqrstuvwxyz012345 here", "token in prose <redacted> here"},
		// vLLM's own dump of its non-default arguments, a quoted flag value,
		// and assignments with blanks around "=" (issue #30 item 6).
		{"non-default args: {'model': 'Qwen/Qwen3-8B', 'api_key': ['sk-abc123', 'sk-def456'], 'port': 8000}", "non-default args: {'model': 'Qwen/Qwen3-8B', 'api_key': [<redacted>], 'port': 8000}"},
		{"Namespace(api_key=['sk-abc123'], port=8000)", "Namespace(api_key=[<redacted>], port=8000)"},
		{`vllm serve m --api-key "sk-abc123" --port 8000`, `vllm serve m --api-key "<redacted>" --port 8000`},
		{`vllm serve m --api-key='sk-abc123'`, `vllm serve m --api-key='<redacted>'`},
		{"HF_TOKEN = hf_x1", "HF_TOKEN = <redacted>"},
		{`api_key = "sk-abc123"`, `api_key = "<redacted>"`},
		{`export HF_TOKEN="hf_x1 x"`, `export HF_TOKEN="<redacted>"`},
		// Not secrets.
		{"max_num_batched_tokens=8192, tokenizer='Qwen/Qwen3-8B'", "max_num_batched_tokens=8192, tokenizer='Qwen/Qwen3-8B'"},
		{"Memory on the node (IP: 10.0.62.231, ID: e5d953ef)", "Memory on the node (IP: 10.0.62.231, ID: e5d953ef)"},
		{"--max-num-batched-tokens 8192 --tokenizer x", "--max-num-batched-tokens 8192 --tokenizer x"},
		{"MONKEY=1 KEYBOARD=us", "MONKEY=1 KEYBOARD=us"},
		{"unauthorized: authentication required", "unauthorized: authentication required"},
	}
	for _, tc := range cases {
		if got := redact(tc.in); got != tc.want {
			t.Errorf("redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// TestClassifyRedactsEvidence: a secret on an evidence line never reaches
// the rendered text.
func TestClassifyRedactsEvidence(t *testing.T) {
	const tok = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm0123456789"
	log := "+ docker run -e HF_TOKEN=" + tok + " hellohal2064/vllm-qwen3.5-gb10 ray start --head\n" +
		"/bin/sh: 1: ray: not found\n" +
		"engine exited; env was HF_TOKEN=" + tok + "\n"
	for _, text := range []string{log, strings.Replace(log, "/bin/sh: 1: ray: not found\n", "", 1)} {
		d := Classify(Input{Logs: []Log{{Host: "spark1", Source: "ray head container", Text: []byte(text)}}, Context: sparkCtx()})
		out := d.Text()
		if strings.Contains(out, tok) || strings.Contains(out, "QwErTy") {
			t.Errorf("secret leaked (%s):\n%s", d.Cause, out)
		}
		if d.Cause == Unknown && !strings.Contains(out, "HF_TOKEN=<redacted>") {
			t.Errorf("redacted line missing:\n%s", out)
		}
	}
}

// TestANSIAndPrefixes: colour codes are removed from evidence, and prefixed
// lines still classify.
func TestANSIAndPrefixes(t *testing.T) {
	line := "\x1b[36m(RayWorkerWrapper pid=249, ip=192.168.200.13)\x1b[0m [E408 23:37:15.918851424 socket.cpp:818] [c10d] The client socket has failed to connect to any network address of (10.1.230.180, 55053).\r\n"
	d := Classify(Input{Logs: []Log{{Host: "spark1", Source: "vllm serve log", Text: []byte(line)}}, Context: sparkCtx()})
	if d.Cause != C10dUnreachable {
		t.Fatalf("cause = %q", d.Cause)
	}
	if strings.Contains(d.Evidence[0].Line, "\x1b") || !strings.HasPrefix(d.Evidence[0].Line, "(RayWorkerWrapper pid=249") {
		t.Errorf("evidence = %q", d.Evidence[0].Line)
	}
	if !strings.Contains(d.Title, "from spark2") {
		t.Errorf("title %q: the ip= tag names spark2", d.Title)
	}
}

// FuzzClassify: any bytes, in up to three logs, classify without panicking
// and render valid UTF-8 evidence with sane line numbers.
func FuzzClassify(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.log"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("Memory on the node (IP: , ID: ) was\n GB / GB ()"))
	f.Add([]byte("GCS at address :\x00network address of (, )\x00specs=[{'node:"))
	ctx := sparkCtx()
	f.Fuzz(func(t *testing.T, data []byte) {
		var logs []Log
		for i, part := range bytes.SplitN(data, []byte{0}, 3) {
			logs = append(logs, Log{Host: []string{"spark1", "spark2", ""}[i], Source: "log", Text: part})
		}
		d := Classify(Input{Logs: logs, Context: ctx})
		if d.Cause == "" || d.Title == "" {
			t.Fatalf("empty diagnosis %+v", d)
		}
		text := d.Text()
		if !strings.HasPrefix(text, "Cause: ") {
			t.Fatalf("text = %q", text)
		}
		for _, e := range d.Evidence {
			if e.LineNo < 1 || !utf8.ValidString(e.Line) || strings.Contains(e.Line, "\n") {
				t.Fatalf("bad evidence %+v", e)
			}
		}
	})
}

// BenchmarkClassify classifies a large serve log (every fixture, repeated)
// from two hosts.
func BenchmarkClassify(b *testing.B) {
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.log"))
	var one []byte
	for _, p := range files {
		for _, l := range readFixture(b, strings.TrimSuffix(filepath.Base(p), ".log")) {
			one = append(one, l.Text...)
		}
	}
	text := bytes.Repeat(one, 50)
	in := Input{Logs: []Log{{Host: "spark1", Text: text}, {Host: "spark2", Text: text}}, Context: sparkCtx()}
	b.SetBytes(int64(2 * len(text)))
	for b.Loop() {
		Classify(in)
	}
}

// TestCUDAOOMNeverBlamesItself: torch lists every process NVML reports on
// the GPU; inside a container NVML's pids are the host's, so the process
// that ran out of memory is listed as "Process N" too. A listed process
// that holds at least what this process's PyTorch holds is this process,
// not another one to stop.
func TestCUDAOOMNeverBlamesItself(t *testing.T) {
	logs := readFixture(t, "cuda-oom")
	d := Classify(Input{Logs: logs, Context: discreteCtx()})
	if d.Cause != CUDAOOM {
		t.Fatalf("cause = %q", d.Cause)
	}
	text := d.Text()
	for _, bad := range []string{"Another process (pid 2684311)", "Stop the other process"} {
		if strings.Contains(text, bad) {
			t.Errorf("the OOM's own process is blamed (%q):\n%s", bad, text)
		}
	}
	if !strings.Contains(text, "pid 2684311") || !strings.Contains(text, "this process") {
		t.Errorf("text does not say pid 2684311 is this process:\n%s", text)
	}
}

// TestCUDAOOMOtherProcess: when torch names this process separately
// ("Including non-PyTorch memory, this process has ..."), every "Process N"
// is another process.
func TestCUDAOOMOtherProcess(t *testing.T) {
	// Verbatim from a public training log (code index id 69148162635).
	line := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 25.96 GiB. GPU 4 has a total capacity of 79.18 GiB of which 23.04 GiB is free. Process 7478 has 4.08 GiB memory in use. Including non-PyTorch memory, this process has 52.02 GiB memory in use. Of the allocated memory 45.89 GiB is allocated by PyTorch, with 1.38 MiB allocated in private pools (e.g., CUDA Graphs), and 3.01 GiB is reserved by PyTorch but unallocated."
	d := Classify(Input{Logs: []Log{{Host: "gpu1", Source: "log", Text: []byte(line + "\n")}}, Context: discreteCtx()})
	text := d.Text()
	if !strings.Contains(text, "Another process (pid 7478) held 4.08 GiB") || !strings.Contains(text, "this process held 52.02 GiB") {
		t.Errorf("text:\n%s", text)
	}
}

// TestPlacementGroupWithoutAddresses: with no node addresses in the context
// (a hand-run deployment given to rayform diagnose) the rule cannot tell
// whether the pinned address is declared; it must not claim it is not.
func TestPlacementGroupWithoutAddresses(t *testing.T) {
	logs := readFixture(t, "placement-group")
	d := Classify(Input{Logs: logs})
	if d.Cause != PlacementGroup {
		t.Fatalf("cause = %q", d.Cause)
	}
	text := d.Text()
	if strings.Contains(text, "not a declared address") || strings.Contains(text, "set network =") {
		t.Errorf("claims facts about a configuration it was not given:\n%s", text)
	}
	for _, w := range []string{"node:10.163.194.101", "ray list nodes", "VLLM_HOST_IP"} {
		if !strings.Contains(text, w) {
			t.Errorf("text lacks %q:\n%s", w, text)
		}
	}
}

// TestRayImportWarningAloneIsNoCause: vLLM prints "Failed to import Ray" as
// a warning on every start without Ray; a single-node run (no Ray in the
// context) that fails for another reason must come out unknown with its
// lines, not "the image has no Ray".
func TestRayImportWarningAloneIsNoCause(t *testing.T) {
	// The warning from a vLLM issue quoted in a public note (code index id
	// 56855166064); the error line from vllm-project/vllm#19951.
	log := "WARNING 04-22 21:56:34 ray_utils.py:46] Failed to import Ray with ModuleNotFoundError(\"No module named 'ray'\"). For distributed inference, please install Ray with `pip install ray`.\n" +
		"pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
	d := Classify(Input{Logs: []Log{{Source: "vllm serve log", Text: []byte(log)}}})
	if d.Cause != FatalError {
		t.Fatalf("cause = %q, want the fatal error:\n%s", d.Cause, d.Text())
	}
	if len(d.Evidence) == 0 || d.Evidence[0].LineNo != 2 {
		t.Errorf("evidence = %+v, want the ValidationError line", d.Evidence)
	}
}

// TestControlSequencesStripped: OSC titles and hyperlinks, cursor moves,
// bells and backspaces never reach an evidence line.
func TestControlSequencesStripped(t *testing.T) {
	line := "\x1b]0;owned\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x1b[2K\x1b[1A\x07\bRuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: eth9\n"
	d := Classify(Input{Logs: []Log{{Source: "log", Text: []byte(line)}}})
	if d.Cause != GlooInterface {
		t.Fatalf("cause = %q", d.Cause)
	}
	got := d.Evidence[0].Line
	want := "link RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: eth9"
	if got != want {
		t.Errorf("evidence = %q, want %q", got, want)
	}
}

// TestRayOOMWithoutContext: with no configuration (a hand-run log given to
// rayform diagnose) the zero Context does not mean "memory_monitor =
// false": the text must not claim the configuration turned the monitor off.
func TestRayOOMWithoutContext(t *testing.T) {
	for _, f := range []string{"ray-oom-task", "ray-oom-actor", "ray-oom-raylet"} {
		d := Classify(Input{Logs: readFixture(t, f)})
		if d.Cause != RayOOM {
			t.Fatalf("%s: cause = %q", f, d.Cause)
		}
		text := d.Text()
		for _, bad := range []string{"turns the monitor off", "did not reach the raylet", "Recreate the Ray containers"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s: claims a configuration it was not given (%q):\n%s", f, bad, text)
			}
		}
		if !strings.Contains(text, "RAY_memory_usage_threshold") {
			t.Errorf("%s: fix lacks the threshold:\n%s", f, text)
		}
	}
}

// TestDeclines: lines that name a possible cause without the evidence for
// it are no diagnosis: a single-node run's own Ray, Gloo's "no error"
// claiming no loopback, a file missing from an existing Hub repository.
func TestDeclines(t *testing.T) {
	cases := []struct {
		name, source, log string
		notCause          Cause
		notText           string
	}{
		{"local ray with the GPUs it needs", "vllm-project/vllm#5495 (issue description; verbatim)",
			"2024-06-13 16:11:50,396 INFO worker.py:1752 -- Started a local Ray instance.\n" +
				"[2024-06-13 16:11:51,588 E 13261 13261] core_worker.cc:228: Failed to register worker 01000000ffffffffffffffffffffffffffffffffffffffffffffffff to Raylet. IOError: [RayletClient] Unable to register worker with raylet. No such file or directory\n",
			RayLocal, "instead of joining the cluster"},
		{"gloo no error is not loopback", "vllm-project/vllm#5094 (verbatim)",
			"ERROR 05-29 04:08:22 worker_base.py:145] RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n",
			"", "advertised the loopback"},
		{"gloo loopback fallback on one node is not the cause", "constructed from wtdcode/vllm-backport#14 (the warning, one node) and vllm-project/vllm#5094 (the failure), both verbatim",
			"[rank7]:[W806 14:25:27.650991133 ProcessGroupGloo.cpp:524] Warning: Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())\n" +
				"ERROR 05-29 04:08:22 worker_base.py:145] RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n",
			"", "fell back to the loopback"},
		{"entry not found is not access", "constructed from huggingface_hub's EntryNotFoundError format",
			"huggingface_hub.errors.EntryNotFoundError: 404 Client Error. (Request ID: Root=1-x)\n\nEntry Not Found for url: https://huggingface.co/Qwen/Qwen3-8B/resolve/main/generation_config.json.\n",
			HFAccess, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Classify(Input{Logs: []Log{{Source: "log", Text: []byte(tc.log)}}})
			if tc.notCause != "" && d.Cause == tc.notCause {
				t.Errorf("cause = %q from %s:\n%s", d.Cause, tc.source, d.Text())
			}
			if tc.notText != "" && strings.Contains(d.Text(), tc.notText) {
				t.Errorf("text claims %q:\n%s", tc.notText, d.Text())
			}
		})
	}
}

// TestRemovedOptionVersion: an option refused by a vLLM older than the
// option's removal is not "removed": vllm-project/vllm#9840 refused --task
// because the image predated it.
func TestRemovedOptionVersion(t *testing.T) {
	line := "api_server.py: error: unrecognized arguments: --task embedding\n" // vllm-project/vllm#9840, verbatim
	d := Classify(Input{Logs: []Log{{Source: "log", Text: []byte(line)}}, Context: Context{VLLMVersion: "0.6.3"}})
	if d.Cause != VLLMArgs {
		t.Fatalf("cause = %q", d.Cause)
	}
	if text := d.Text(); strings.Contains(text, "was removed from vLLM") || strings.Contains(text, "no longer accepts") || !strings.Contains(d.Title, "does not know --task") {
		t.Errorf("claims a removal for a vLLM older than it:\n%s", text)
	}
}

func TestVersionAtLeast(t *testing.T) {
	cases := []struct {
		v, min string
		want   bool
	}{
		{"0.10.0", "0.10.0", true}, {"0.10.1", "0.10.0", true}, {"0.9.2", "0.10.0", false},
		{"0.13.0rc1", "0.13.0", true}, {"v0.18.0", "0.18.0", true}, {"0.17.1+cu128", "0.18.0", false},
		{"1.0", "0.18.0", true}, {"0.18", "0.18.0", true},
	}
	for _, c := range cases {
		if got := VersionAtLeast(c.v, c.min); got != c.want {
			t.Errorf("VersionAtLeast(%q, %q) = %v, want %v", c.v, c.min, got, c.want)
		}
	}
}

// TestFixtureSources: every fixture names its source in a "# source:"
// line and has a row in testdata/diagnose/SOURCES.md (rule → fixtures).
func TestFixtureSources(t *testing.T) {
	index, err := os.ReadFile(filepath.Join(fixtureDir, "SOURCES.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.log"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".log")
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(raw), "# source: ") {
			t.Errorf("%s.log does not start with a \"# source:\" line", name)
		}
		if !strings.Contains(string(index), "| "+name+" |") {
			t.Errorf("%s.log has no row in SOURCES.md", name)
		}
	}
}

// TestGCSPortFromLog: with no configuration, the fix names the GCS port the
// log shows, not Ray's default.
func TestGCSPortFromLog(t *testing.T) {
	for f, port := range map[string]string{"gcs-unreachable": ":20000", "gcs-unreachable-fabric": ":41000"} {
		d := Classify(Input{Logs: readFixture(t, f)})
		if d.Cause != GCSUnreachable {
			t.Fatalf("%s: cause = %q", f, d.Cause)
		}
		if !strings.Contains(d.Fix, port) || strings.Contains(d.Fix, ":6379") {
			t.Errorf("%s: fix does not use the log's port %s: %s", f, port, d.Fix)
		}
	}
}
