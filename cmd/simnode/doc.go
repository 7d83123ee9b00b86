/*
Command simnode is one static binary that plays, in the lab, the programs of a
GPU node that cannot run here. It is selected by the base name of argv[0]
(install symlinks named ray, vllm, nvidia-smi, ibdev2netdev,
nvidia-container-runtime-hook, flock) or invoked as `simnode <tool> args...`.
Everything it does that crosses the network is real: the Ray GCS is a TCP
server, raylets and vLLM workers connect to it and to each other from their
own network namespace, so a wrong address fails because a route is missing.

# Hardware contract

Every tool reads the node's simulated hardware from the JSON file named by
SIMNODE_HARDWARE, else /etc/simnode/hardware.json:

	{
	  "gpus": [{"name": "NVIDIA GB10", "memory_mib": 0}],  // 0 = unified memory: nvidia-smi prints [N/A]
	  "memory_mib": 122572,          // system RAM (119.70 GiB, a DGX Spark)
	  "base_used_mib": 5684,         // used by everything but simulated processes (default 5684)
	  "unified_memory": true,        // GPU memory is system memory (GB10)
	  "driver_version": "580.95.05",
	  "cuda_version": "13.0",
	  "cpus": 20,                    // Ray's CPU resource (default 20)
	  "graph_pool_mib": 512,         // extra memory CUDA graph capture takes (default 512)
	  "rdma": [{"hca": "rocep1s0f1", "port": 1, "netdev": "enp1s0f1np1"}],
	  "timing": {"weight_load": "2s", "graph_capture": "1s", "placement_group_timeout": "3s", "c10d_timeout": "3s"},
	  "models": {"org/name": {"architecture": "LlamaForCausalLM", "weights_gib": 15, "shards": 4, "max_model_len": 32768, "kv_bytes_per_token": 131072}}
	}

GPU fields uuid, pci_bus_id, temperature_c, compute_cap and mig ("Enabled",
"Disabled"; nvidia-smi prints [N/A] without it) are optional. With
no hardware file the node has no NVIDIA driver: nvidia-smi prints "NVIDIA-SMI
has failed because it couldn't communicate with the NVIDIA driver. Make sure
that the latest NVIDIA driver is installed and running." and exits 9, Ray
registers 0 GPUs and vLLM fails to infer a device type. With the defaults
above, `vllm serve --gpu-memory-utilization 0.90` on a unified 122572 MiB node
reaches 113.78GB / 119.70GB (0.950543) during CUDA graph capture, just over
Ray's 0.95 threshold, as in the seed.

# Timing

Simulated durations have defaults close to reality and are overridden by the
hardware file's "timing" object, then by environment variables
SIMNODE_<KEY> (Go durations): engine_init, weight_load (the whole checkpoint,
spread over its shards), profile_run, graph_capture,
placement_group_timeout (vLLM's PG_WAIT_TIMEOUT, 1800s),
placement_group_wait_interval (10s, doubling), c10d_timeout (600s),
gcs_connect_timeout (5s per attempt), heartbeat_period, heartbeat_timeout
(a silent raylet is marked DEAD), gcs_reconnect (60s), stop_grace. Two
numbers: SIMNODE_TOKENS_PER_SECOND (generation rate, default 30) and
SIMNODE_GCS_RETRIES (GCS connection attempts of `ray start`, default 3).
Ray's own settings come from Ray's variables in `ray start`'s environment:
RAY_memory_monitor_refresh_ms (250, 0 disables the memory monitor) and
RAY_memory_usage_threshold (0.95).

# State on disk

Ray's temp root is --temp-dir, else $RAY_TMPDIR/ray (Ray's own variable),
else $TMPDIR/ray, else /tmp/ray: sessions, logs
(session_latest/logs/raylet.out, gcs_server.out, worker-*.out) and
ray_current_cluster live there; tests give each simulated node its own
RAY_TMPDIR. Simulated memory use is recorded per process under
$SIMNODE_STATE_DIR/mem (default /tmp/simnode/mem); processes of one node must
share it (one container, or a bind-mounted directory).

# Tools

ray: start (--head or --address; real Ray's flag set, click's errors; node IP
from --node-ip-address, else the source address of the default route for a
head, or of the route to the head for a worker, found with a UDP connect that
sends nothing), stop [-f] [-g N], status, list nodes (--format
default|table|json|yaml, --filter, --detail), health-check. Without --block,
`ray start` detaches a daemon (argv[0] "raylet") that runs the GCS on
0.0.0.0:<port> and the dashboard (head) and the raylet; with --block it stays
in the foreground and exits 1 with "Some Ray subprocesses exited unexpectedly:"
if the daemon dies (a daemon stopped by `ray stop` is graceful and keeps it
blocking, as in Ray). `ray stop` stops the daemons whose session lives under
this node's Ray temp root (real Ray kills every Ray process on the host; the
temp root keeps nodes that share a PID namespace apart). The dashboard answers /api/gcs_healthz, /api/version,
/api/v0/nodes, /nodes?view=summary and /api/cluster_status.

vllm: serve MODEL with vLLM's flags and argparse errors. The ray backend
(explicit, or when TP x PP exceeds the node's GPUs) finds the cluster through
RAY_ADDRESS or ray_current_cluster (else starts a local instance, as
ray.init() does; no `ray` on PATH means Ray is not installed), places
[{GPU: 1}] x world with node:<driver ip> on the first bundle, starts one
RayWorkerWrapper process per bundle in that node's raylet, copies the
driver's environment as vLLM's ray_env.py does (VLLM_, NCCL_, UCX_, HF_...
prefixes, minus VLLM_HOST_IP and the names in
$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json), then runs c10d's
TCPStore rendezvous on tcp://<driver ip>:<free port>, the Gloo and NCCL
interface checks and NCCL's bootstrap ring over real TCP, weight loading,
KV cache sizing and CUDA graph capture, and serves the OpenAI API.
Weights come from the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub,
else ~/.cache/huggingface/hub): with HF_HUB_OFFLINE=1 the repository id
becomes its snapshot (refs/REVISION), or the serve fails at once with
huggingface_hub's LocalEntryNotFoundError; every worker then loads the
shards from that path on its own node, failing as vLLM's loader does where
they are not there (internal/vllm/hfcache.go). A model in the cache (or a
model directory) gives its architecture and shard sizes; without
HF_HUB_OFFLINE a repository not in the cache keeps simulated weights.

With the real Ray in the image (the lab's -ray real: the ray on PATH is Ray's
Python entry point, not simnode), the ray backend is instead vLLM 0.17.1's
Ray executor in Python on Ray's own API (internal/vllm/ray_executor.py, run
with the image's python3; its header cites the vLLM files it follows):
get_ip(), ray.init(), the GPU check, the PACK placement group with
node:<driver ip>, one real RayWorkerWrapper actor per bundle, the unique-IP
check; every actor runs torch's own c10d rendezvous at the driver's address
and a Gloo all_reduce, and drives simnode's Go worker (`simnode
__ray-worker`, a child of the actor) through the simulated phases. simnode's
raylet, GCS and raystate then play no part.

nvidia-smi: --query-gpu=FIELDS --format=csv[,noheader][,nounits],
--query-compute-apps, -L, -i, the default table.

ibdev2netdev [-v]: one line per RDMA port, Up/Down from the netdev's
operstate in the current namespace.

flock: util-linux's flock(1) (Debian's busybox-static has no flock applet),
both forms, `flock [-sxun] [-w SECS] [-E CODE] [-o] [-F] FD` and
`flock [options] FILE|DIR COMMAND [ARG...]` (or `-c COMMAND`), with its exit
codes: 1 on a conflict under -n or -w (CODE under -E), 64 on a usage error,
66 when the file cannot be opened, 65 when flock(2) fails, 69 when the
command cannot be executed, else the command's status. The lock file is
opened without close-on-exec, so the command inherits the lock.

nvidia-container-runtime-hook prestart: as registered by dockerd (moby's
daemon/nvidia_linux.go: args ["nvidia-container-runtime-hook", "prestart"],
dockerd's environment), reads the container state on stdin and the bundle's
config.json, and copies $SIMNODE_HARDWARE (or /etc/simnode/hardware.json) to
<rootfs>/etc/simnode/hardware.json, keeping the GPUs NVIDIA_VISIBLE_DEVICES
selects; containers started without --gpus never see a driver.
*/
package main
