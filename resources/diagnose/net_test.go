package diagnose

import (
	"net/netip"
	"strings"
	"testing"
)

// TestNodeOfNCCLPrefix: a log read without a host names it in NCCL's
// "host:pid:tid [dev]" prefix (also behind mpirun's "[rank] " and NCCL's
// timestamp), and a declared host wins over it.
func TestNodeOfNCCLPrefix(t *testing.T) {
	for _, c := range []struct{ host, line, want string }{
		{"", "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion", "node-2"},
		{"", "[3] node0:13571:13571 [0] NCCL INFO Bootstrap : Using enp10s0:10.10.7.107<0>", "node0"},
		{"", "[2026-11-29 23:22:58] vm:1004:1004 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found", "vm"},
		{"spark1", "node-2:5776:5902 [0] NCCL WARN x", "spark1"},
		{"", "ERROR 06-30 13:53:19 [core.py:515] EngineCore failed to start.", ""},
	} {
		s := newScan(Input{Logs: []Log{{Host: c.host, Text: []byte(c.line)}}})
		if got := s.nodeOf(0); got != c.want {
			t.Errorf("nodeOf(%q) with host %q = %q, want %q", c.line, c.host, got, c.want)
		}
	}
}

// netCase is one log, built from a source's message template with values
// of our own, and what Classify must say of it.
type netCase struct {
	name  string
	ctx   Context
	lines []string
	cause Cause
	// in lists texts the title, explanation or fix must hold.
	in []string
}

func runNetCases(t *testing.T, cases []netCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Classify(Input{Logs: []Log{{Source: "log", Text: []byte(strings.Join(c.lines, "\n"))}}, Context: c.ctx})
			if d.Cause != c.cause {
				t.Fatalf("cause %s, want %s:\n%s", d.Cause, c.cause, d.Text())
			}
			all := d.Title + "\n" + d.Explanation + "\n" + d.Fix
			for _, w := range c.in {
				if !strings.Contains(all, w) {
					t.Errorf("no %q in:\n%s", w, d.Text())
				}
			}
		})
	}
}

// TestRayPortUnreachable: Ray's process failing to reach a Ray port other
// than the GCS port names the port and its node and says to open it; the
// GCS port, the process's own raylet and a declared GCS port are not this
// cause. Templates: gRPC's tcp_client_posix.cc as Ray logs it, Ray < 2's
// redis_context.cc.
func TestRayPortUnreachable(t *testing.T) {
	grpc := "[2026-12-01 10:00:00,000 E 811 902] core_worker.cc:512: RPC Error message: failed to connect to all addresses; last error: UNKNOWN: ipv4:10.9.0.2:8076: Failed to connect to remote host: "
	runNetCases(t, []netCase{
		{name: "grpc refused", lines: []string{grpc + "Connection refused"}, cause: RayPortUnreachable,
			in: []string{"port 8076 on 10.9.0.2", "other than the GCS port", "was refused", "Open TCP port 8076 on 10.9.0.2", "--node-manager-port"}},
		{name: "grpc timed out, fabric declared", ctx: Context{NodeAddrs: map[string]string{"spark2": "10.9.0.2"}, FabricCIDR: netip.MustParsePrefix("10.9.0.0/24")},
			lines: []string{grpc + "Connection timed out"}, cause: RayPortUnreachable,
			in: []string{"spark2's fabric address", "dropped on the way", "Open TCP port 8076 on spark2 to 10.9.0.0/24"}},
		{name: "bare grpc", lines: []string{"E0220 18:04:58.267797  1310 direct_task_transport.cc:146] Retrying attempt to schedule task at remote node. Error: IOError: 14: failed to connect to all addresses"},
			cause: RayPortUnreachable, in: []string{"failed to connect to all addresses", "does not name the address"}},
		{name: "redis shard", lines: []string{"F1201 10:00:00.000000 7 7 redis_context.cc:298] Could not establish connection to redis 10.9.0.1:6380 (context.err = 1)"},
			cause: RayPortUnreachable, in: []string{"port 6380 on 10.9.0.1", "Redis shard"}},
		{name: "redis on the declared GCS port", ctx: Context{RayPort: 6380},
			lines: []string{"F1201 10:00:00.000000 7 7 redis_context.cc:298] Could not establish connection to redis 10.9.0.1:6380 (context.err = 1)"}, cause: GCSUnreachable, in: []string{"cannot reach the GCS at 10.9.0.1:6380"}},
		{name: "grpc to the GCS port", lines: []string{"[2026-12-01 10:00:00,000 E 811 902] gcs_client.cc:1: failed to connect to all addresses; last error: UNKNOWN: ipv4:10.9.0.1:6379: Failed to connect to remote host: Connection refused"},
			cause: GCSUnreachable, in: []string{"cannot reach the GCS at 10.9.0.1:6379 (Connection refused)"}},
		{name: "own raylet", lines: []string{"[2026-12-01 10:00:00,000 E 811 902] core_worker_process.cc:216: Failed to get the system config from raylet because it is dead. Worker will terminate. Status: GrpcUnavailable: RPC Error message: failed to connect to all addresses; RPC Error details:  .Please see `raylet.out` for more details."},
			cause: FatalError},
	})
}

// TestNCCLNet: NCCL's own WARN lines of its transports, in the shapes of
// several releases (misc/socket.cc, include/socket.h, transport/net_ib.cc,
// misc/shmutils.cc, include/shm.h), name the class with the node, the peer
// and what NCCL used there; the line that broke first wins over a peer's
// closed socket; a WARN its process went past is no failure.
func TestNCCLNet(t *testing.T) {
	const p = "gpu1:10:20 [0] "
	runNetCases(t, []netCase{
		{name: "poll connect refused (2.19+)", lines: []string{p + "misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.1.0.2<40000> returned 111(Connection refused) errno 115(Operation now in progress)"},
			cause: NCCLSocket, in: []string{"NCCL on gpu1 cannot connect to 10.1.0.2 (port 40000): connection refused", "NCCL_SOCKET_IFNAME=", "ping 10.1.0.2"}},
		{name: "connect timed out (2.4), docker0 chosen", lines: []string{
			p + "NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>",
			p + "include/socket.h:390 NCCL WARN Connect to 10.1.0.2<40000> failed : Connection timed out"},
			cause: NCCLSocket, in: []string{"(Connection timed out)", "uses docker0 (172.17.0.1), its own choice", "container or VM bridge"}},
		{name: "call to connect (2.2)", lines: []string{p + "include/socket.h:360 WARN Call to connect failed : Connection timed out"},
			cause: NCCLSocket, in: []string{"Connection timed out"}},
		{name: "closed by peer", lines: []string{p + "misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer gpu2<51159>"},
			cause: NCCLSocket, in: []string{"lost its connection to gpu2", "peer rank failed first"}},
		{name: "IB completion (2.4)", lines: []string{p + "transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129"},
			cause: NCCLIB, in: []string{"completion status 12, vendor err 129", "IBV_WC_RETRY_EXC_ERR", "NCCL_IB_GID_INDEX=<that index>", "show_gids"}},
		{name: "IB completion (2.19+) with GID index", lines: []string{
			p + "NCCL INFO NCCL_IB_GID_INDEX set by environment to 0.",
			p + "transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.1.0.2<33092> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.0.1 remoteGids::ffff:10.1.0.2 hca mlx5_0"},
			cause: NCCLIB, in: []string{"talking to 10.1.0.2", "GID index 0", "IPv4-mapped", "mlx5_0"}},
		{name: "shm full (2.19+)", lines: []string{p + "misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888), error: No space left on device (28)"},
			cause: NCCLShm, in: []string{"on gpu1", "/dev/shm/nccl-abc (9.2 MiB)", "64 MB", "--shm-size"}},
		{name: "shm fallocate (2.7)", lines: []string{p + "include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device", p + "include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-1-0-1-3 (size 9637888)"},
			cause: NCCLShm, in: []string{"nccl-shm-recv-1-0-1-3 (9.2 MiB)", "was full"}},
		{name: "shm attach", lines: []string{p + "misc/shmutils.cc:132 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-abc (size 9637888), error: No such file or directory (2)"},
			cause: NCCLShm, in: []string{"could not attach", "--ipc=host"}},
		{name: "shm before the peers' closed sockets", lines: []string{
			"gpu2:11:21 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer gpu1<51159>",
			p + "misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888), error: No space left on device (28)"},
			cause: NCCLShm},
		{name: "torch's Last error", lines: []string{
			"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
			"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
			"Last error:",
			"socketStartConnect: Connect to 10.1.0.2<45763> failed : Software caused connection abort"},
			cause: NCCLSocket, in: []string{"cannot connect to 10.1.0.2 (port 45763) (Software caused connection abort)", "firewall"}},
		{name: "no interface (2.3)", lines: []string{p + "include/socket.h:311 WARN Socket creation failed : Address family not supported by protocol"},
			cause: NCCLInterface, in: []string{"no usable socket interface on gpu1"}},
		{name: "went past", lines: []string{
			p + "misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer gpu2<51159>",
			"INFO 12-01 10:00:00 [api_server.py:1] Application startup complete."},
			cause: Healthy},
	})
}

// TestDriverTooOld: the container runtime's CUDA requirement, CUDA error
// 804 and torch's driver check name the versions and the driver the image
// needs (templates: libnvidia-container's dsl.c, cudaGetErrorString,
// torch/cuda/__init__.py, nvidia-smi's header).
func TestDriverTooOld(t *testing.T) {
	runNetCases(t, []netCase{
		{name: "unsatisfied condition", lines: []string{"docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'",
			"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container"},
			cause: DriverTooOld, in: []string{"too old for the image's CUDA 12.8", "refused to start the container", "≥ 570.26", "NVIDIA_DISABLE_REQUIRES"}},
		{name: "804 with nvidia-smi", lines: []string{"| NVIDIA-SMI 525.147.05   Driver Version: 525.147.05   CUDA Version: 12.0     |",
			"RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW"},
			cause: DriverTooOld, in: []string{"(the driver 525.147.05 supports CUDA 12.0)", "error 804", "(≤ 12.0)"}},
		{name: "torch's driver check", lines: []string{"RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver."},
			cause: DriverTooOld, in: []string{"supports CUDA 11.4"}},
	})
}

// TestCUDAArchUnsupported: the sources' statements that a kernel was not
// built for the GPU (a kernel's device assert, torch's capability check, a
// JIT's missing arch-named source, the CUDA runtime's "no kernel image")
// name the class with the architectures; a missing file that is no kernel
// source of an architecture is not this cause.
func TestCUDAArchUnsupported(t *testing.T) {
	runNetCases(t, []netCase{
		{name: "device assert", lines: []string{"This kernel only supports sm100.", "cudaErrorLaunchFailure: unspecified launch failure"},
			cause: CUDAArchUnsupported, in: []string{"the kernel supports only sm_100"}},
		{name: "torch capability", lines: []string{"UserWarning: NVIDIA GB10 with CUDA capability sm_121 is not compatible with the current PyTorch installation.",
			"RuntimeError: CUDA error: no kernel image is available for execution on the device"},
			cause: CUDAArchUnsupported, in: []string{"sm_121 (NVIDIA GB10, DGX Spark)", "TORCH_CUDA_ARCH_LIST"}},
		{name: "JIT source missing, wrapped", lines: []string{"RuntimeError: Assertion error (include_parser.hpp:69):", "Failed to open: /opt/venv/deep_gemm/", "include/deep_gemm/impls/sm90_fp8_gemm_1d1d.cuh"},
			cause: CUDAArchUnsupported, in: []string{"not built for sm_90"}},
		{name: "another missing file", lines: []string{"RuntimeError: Failed to open: /models/config.json"}, cause: FatalError},
	})
}

// TestRayNodeDead: the GCS marking a node dead for missed health checks,
// with no memory kill in the logs, is the head failing to reach the node's
// Ray ports; with Ray's memory monitor in the logs it is not this cause.
func TestRayNodeDead(t *testing.T) {
	dead := "(raylet) The node with node id: 0f21 and address: 10.9.0.3 and node name: 10.9.0.3 has been marked dead because the detector has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, preempted node, etc.) "
	runNetCases(t, []netCase{
		{name: "after joining", ctx: Context{NodeAddrs: map[string]string{"spark2": "10.9.0.3"}}, lines: []string{dead},
			cause: RayPortUnreachable, in: []string{"raylet of node spark2", "On spark2: allow TCP"}},
		{name: "raylet told", lines: []string{"[2026-12-01 10:00:00,000 C 89 89] (raylet) node_manager.cc:1: [Timeout] Exiting because this node manager has mistakenly been marked as dead by the GCS: GCS failed to check the health of this node for 5 times."},
			cause: RayPortUnreachable},
		{name: "memory kill", lines: []string{"(raylet) [2026-12-01 10:00:00,000 E 9 9] (raylet) node_manager.cc:3084: 4 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 1, IP: 10.9.0.3) over the last time period.", dead},
			cause: RayOOM},
	})
}

// TestRayNodeIPMismatch: Ray's "no matched Raylet address" names the IP
// when a process failed after it, and is no failure when nothing did.
func TestRayNodeIPMismatch(t *testing.T) {
	line := "[2026-12-01 10:00:00,000 I 5 5] global_state_accessor.cc:357: This node has an IP address of 10.9.0.7, while we can not find the matched Raylet address. This maybe come from when you connect the Ray cluster with a different IP address or connect a container."
	runNetCases(t, []netCase{
		{name: "then failed", ctx: Context{MgmtAddrs: map[string]string{"spark2": "10.9.0.7"}},
			lines: []string{line, "[2026-12-01 10:00:10,000 C 5 6] core_worker.cc:251: Failed to get the system config from Raylet on time unexpectedly."},
			cause: RayNodeIPMismatch, in: []string{"under its node's IP 10.9.0.7 (spark2's management address)", "--node-ip-address=10.9.0.7"}},
		{name: "went on", lines: []string{line, "2026-12-01 10:00:01,000\tINFO worker.py:1 -- Connected to Ray cluster.", "INFO 12-01 10:00:09 [api_server.py:1] Application startup complete."},
			cause: Healthy},
	})
}

// TestRayLevelLines: Ray's C++ log lines at E or C (RAY_LOG(FATAL)),
// also behind Ray's "(raylet, ip=…)" tag, are the fatal error a log
// without a rule is named by; at I they are not.
func TestRayLevelLines(t *testing.T) {
	runNetCases(t, []netCase{
		{name: "E behind the raylet tag", lines: []string{"(raylet, ip=10.9.0.3) [2026-12-01 10:00:00,000 E 5 6] node_manager.cc:1: Something broke: code 7"},
			cause: FatalError, in: []string{"Something broke: code 7"}},
		{name: "C", lines: []string{"[2026-12-01 10:00:00,000 C 5 6] core_worker.cc:251: Unexpected state 9."}, cause: FatalError},
		{name: "I", lines: []string{"[2026-12-01 10:00:00,000 I 5 6] core_worker.cc:251: Nothing wrong, state 9."}, cause: Unknown},
	})
}
