# vLLM 0.17.1's Ray executor, on the real Ray and the real torch.distributed.
#
# simnode's `vllm serve` (Go: argument parsing, the engine's simulated
# phases, the OpenAI server) runs this with the image's python3 when the
# image carries the real Ray (engine/lab's -ray real). It does what vLLM's
# RayDistributedExecutor does before the model exists, with Ray's and
# torch's own code, and drives the simulated parts of each rank (weight
# loading, KV cache, CUDA graphs: simnode's Go worker, started by each Ray
# actor in its own container) through the same calls vLLM makes.
#
# Sources, vLLM 0.17.1 (the seeds' image; wheel vllm-0.17.1-cp38-abi3-
# manylinux_2_31_x86_64.whl from PyPI):
#   get_ip                  vllm/utils/network_utils.py get_ip
#   initialize_ray_cluster  vllm/v1/executor/ray_utils.py initialize_ray_cluster,
#                           _wait_until_pg_ready, _verify_bundles (PG_WAIT_TIMEOUT = 1800)
#   _init_workers_ray       vllm/v1/executor/ray_executor.py
#                           RayDistributedExecutor._init_workers_ray
#   RayWorkerWrapper        vllm/v1/executor/ray_utils.py (get_node_ip,
#                           get_node_and_gpu_ids) and vllm/v1/worker/worker_base.py
#                           (execute_method's "Error executing method" log)
#   init_process_group      vllm/distributed/parallel_state.py init_distributed_environment
#
# Protocol with simnode (Go, cmd/simnode/internal/vllm/realray.go): one JSON
# object a line; commands on stdin, answers on fd 3; stdout and stderr are
# the driver's own (Ray's log lines, the actors' output Ray forwards with its
# "(RayWorkerWrapper pid=..., ip=...)" prefix), which simnode prints as the
# engine core's.

import json
import os
import socket
import sys
import time
import warnings

# The driver's process; the actors (Ray pickles this module's functions
# into them by value) print instead of writing to fd 3.
DRIVER_PID = os.getpid()


def send(**kw):
    data = (json.dumps(kw) + "\n").encode()
    while data:
        data = data[os.write(3, data):]


def log(level, where, msg):
    if os.getpid() != DRIVER_PID:
        print("%s %s [%s] %s" % (level, time.strftime("%m-%d %H:%M:%S"), where, msg), flush=True)
        return
    send(log={"level": level, "file": where, "msg": msg})


def fail(typ, msg, trace=None, **kw):
    send(error=dict(type=typ, msg=msg, trace=trace or [], **kw))
    sys.exit(0)


def get_ip():
    """vllm/utils/network_utils.py get_ip (0.17.1)."""
    host_ip = os.environ.get("VLLM_HOST_IP", "")
    if "HOST_IP" in os.environ and "VLLM_HOST_IP" not in os.environ:
        log("WARNING", "network_utils.py:36",
            "The environment variable HOST_IP is deprecated and ignored, as"
            " it is often used by Docker and other software to"
            " interact with the container's network stack. Please "
            "use VLLM_HOST_IP instead to set the IP address for vLLM processes"
            " to communicate with each other.")
    if host_ip:
        return host_ip
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("8.8.8.8", 80))  # Doesn't need to be reachable
            return s.getsockname()[0]
    except Exception:
        pass
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.connect(("2001:4860:4860::8888", 80))  # Doesn't need to be reachable
            return s.getsockname()[0]
    except Exception:
        pass
    warnings.warn(
        "Failed to get the IP address, using 0.0.0.0 by default."
        "The value can be set by the environment variable"
        " VLLM_HOST_IP or HOST_IP.",
        stacklevel=2,
    )
    return "0.0.0.0"


# The traceback vLLM prints above a worker's exception in init_device
# (vllm/v1/worker/worker_base.py execute_method, gpu_worker.py init_device,
# parallel_state.py init_distributed_environment).
INIT_DEVICE_TRACE = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/worker_base.py", line 336, in execute_method',
    "    return run_method(self, method, args, kwargs)",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/serial_utils.py", line 479, in run_method',
    "    return func(*args, **kwargs)",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 232, in init_device',
    "    init_worker_distributed_environment(self.vllm_config, self.rank,",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/parallel_state.py", line 1184, in init_distributed_environment',
    "    torch.distributed.init_process_group(",
]


class RayWorkerWrapper:
    """vLLM's RayWorkerWrapper: one per placement-group bundle. Its
    simulated half is simnode's Go worker (`simnode __ray-worker`), a child
    process in the actor's container that answers vLLM's worker calls on a
    pipe; the distributed half (c10d, Gloo) is real torch, here."""

    def __init__(self, simnode, spec, rpc_rank=0):
        import ctypes
        import subprocess

        self.rpc_rank = rpc_rank
        self.init = {}
        r, w = os.pipe()

        def child():
            # The Go worker answers on fd 3 (close_fds would close it after
            # this runs, hence close_fds=False).
            os.dup2(w, 3)
            ctypes.CDLL("libc.so.6").prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL

        self.proc = subprocess.Popen(
            [simnode, "__ray-worker"], stdin=subprocess.PIPE, preexec_fn=child, close_fds=False)
        os.close(w)
        self.ctl = os.fdopen(r, "r")
        self.seq = 0
        self.proc.stdin.write((json.dumps({"class_name": "RayWorkerWrapper", "spec": spec}) + "\n").encode())
        self.proc.stdin.flush()

    def _go(self, method, args=None):
        """Sends one call to the Go worker and relays its output until the
        reply (stdout and stderr lines go to this actor's, which Ray
        forwards to the driver)."""
        self.seq += 1
        self.proc.stdin.write((json.dumps({"seq": self.seq, "method": method, "args": args}) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            line = self.ctl.readline()
            if not line:
                return {"err_type": "RuntimeError", "err_msg": "simnode worker exited"}
            m = json.loads(line)
            if m.get("msg") is not None:
                return m["msg"]
            stream = sys.stderr if m.get("stream") == "stderr" else sys.stdout
            print(m.get("line", ""), file=stream, flush=True)

    def get_node_ip(self):
        return get_ip()

    def get_node_and_gpu_ids(self):
        import ray

        node_id = ray.get_runtime_context().get_node_id()
        gpu_ids = ray.get_runtime_context().get_accelerator_ids()["GPU"]
        return node_id, gpu_ids

    def who(self):
        import ray

        ctx = ray.get_runtime_context()
        return {"pid": os.getpid(), "actor_id": ctx.get_actor_id(), "ip": ray.util.get_node_ip_address()}

    def execute_method(self, method, args):
        if method == "update_environment_variables":
            # vllm/v1/worker/worker_base.py update_environment_variables
            for k, v in (args or {}).items():
                os.environ[k] = v
        if method == "init_worker":
            self.init = dict(args)
            args = dict(args, external_rendezvous=True)
        reply = self._go(method, args)
        if method != "init_device" or reply.get("err_type"):
            return reply
        try:
            self._init_process_group()
        except Exception as e:  # reported as vLLM's execute_method logs it
            typ = type(e).__module__ + "." + type(e).__name__ if type(e).__module__ not in ("builtins",) else type(e).__name__
            self._log_error(method, typ, str(e))
            return {"err_type": typ, "err_msg": str(e), "trace": INIT_DEVICE_TRACE}
        return reply

    def _init_process_group(self):
        """init_distributed_environment's torch.distributed.init_process_group:
        a TCPStore rendezvous at distributed_init_method (rank 0 serves it),
        then a Gloo all_reduce among the ranks."""
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        a = self.init
        dist.init_process_group(
            backend="gloo", init_method=a["distributed_init_method"],
            world_size=a["world_size"], rank=a["rank"],
            timeout=timedelta(seconds=a["c10d_timeout_s"]))
        t = torch.ones(1)
        dist.all_reduce(t)
        if int(t.item()) != a["world_size"]:
            raise RuntimeError("gloo all_reduce gave %s, want %d" % (t.item(), a["world_size"]))

    def _log_error(self, method, typ, msg):
        head = "ERROR %s [worker_base.py:623] " % time.strftime("%m-%d %H:%M:%S")
        print(head + "Error executing method '%s'. This might cause deadlock in distributed execution." % method, flush=True)
        for line in INIT_DEVICE_TRACE + (typ + ": " + msg).split("\n"):
            print(head + line, flush=True)

    def shutdown(self):
        try:
            self._go("shutdown")
        finally:
            self.proc.kill()


def main():
    cfg = json.loads(sys.stdin.readline())
    world, tp = cfg["world_size"], cfg["tensor_parallel_size"]
    try:
        import ray
        from ray.util.placement_group import placement_group, placement_group_table
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError as e:
        # ray_utils.py assert_ray_available
        fail("ValueError", "Failed to import Ray: %s. Please install Ray with `pip install ray`." % e)

    # initialize_ray_cluster: ray.init(address=None) finds the running
    # cluster (RAY_ADDRESS, else the node's ray_current_cluster) or starts one.
    ray.init(address=cfg.get("ray_address"), log_to_driver=True)
    device_str = "GPU"
    log("INFO", "ray_utils.py:417", "No current placement group found. Creating a new placement group.")
    num_devices_in_cluster = ray.cluster_resources().get(device_str, 0)
    if world > num_devices_in_cluster:
        log("WARNING", "ray_utils.py:423",
            "The number of required %ss exceeds the total number of available %ss in the placement group." % (device_str, device_str))
    specs = [{device_str: 1.0} for _ in range(world)]
    current_ip = get_ip()
    current_node_id = ray.get_runtime_context().get_node_id()
    from ray._private.state import available_resources_per_node

    current_node_resource = available_resources_per_node()[current_node_id]
    if current_node_resource.get(device_str, 0) < 1:
        fail("ValueError",
             f"Current node has no {device_str} available. "
             f"{current_node_resource=}. vLLM engine cannot start without "
             f"{device_str}. Make sure you have at least 1 {device_str} "
             f"available in a node {current_node_id=} {current_ip=}.", cfg["engine_trace"])
    specs[0][f"node:{current_ip}"] = 0.001
    pg = placement_group(specs, strategy="PACK")

    # _wait_until_pg_ready, with PG_WAIT_TIMEOUT (1800 s in vLLM) and the
    # first wait interval (10 s) from the lab's timing.
    timeout, interval = cfg["pg_timeout_s"], cfg["pg_wait_interval_s"]
    s = time.time()
    ready_ref = pg.ready()
    while time.time() - s < timeout:
        ready, _ = ray.wait([ready_ref], timeout=min(interval, max(timeout - (time.time() - s), 0.001)))
        if ready:
            break
        interval *= 2
        log("INFO", "ray_utils.py:267",
            "Waiting for creating a placement group of specs for "
            "%d seconds. specs=%s. Check `ray status` and "
            "`ray list nodes` to see if you have enough resources,"
            " and make sure the IP addresses used by ray cluster"
            " are the same as VLLM_HOST_IP environment variable"
            " specified in each node if you are running on a multi-node." % (int(time.time() - s), pg.bundle_specs))
    try:
        ray.get(ready_ref, timeout=0)
    except ray.exceptions.GetTimeoutError:
        shown = cfg["pg_timeout_shown"]
        pg_trace = cfg["engine_trace"] + [
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_utils.py", line 455, in initialize_ray_cluster',
            "    _wait_until_pg_ready(current_placement_group)",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_utils.py", line 289, in _wait_until_pg_ready',
            "    raise ValueError(",
        ]
        total_gpu_required = sum(spec.get("GPU", 0) for spec in specs)
        if total_gpu_required > 1:
            fail("ValueError",
                 f"Cannot provide a placement group requiring "
                 f"{total_gpu_required} GPUs "
                 f"(placement_group_specs={specs}) within "
                 f"{shown} seconds.\n"
                 f"Tensor parallel size may exceed available GPUs in your "
                 f"cluster. Check resources with `ray status` and "
                 f"`ray list nodes`.\n"
                 f"If running on K8s with limited GPUs, consider reducing "
                 f"--tensor-parallel-size to match available GPU resources.", pg_trace)
        fail("ValueError",
             "Cannot provide a placement group of "
             f"placement_group_specs={specs} within "
             f"{shown} seconds. See "
             "`ray status` and `ray list nodes` to make sure the cluster "
             "has enough resources.", pg_trace)

    # _verify_bundles
    pg_data = placement_group_table(pg)
    node_id_to_bundle = {}
    for idx, node_id in pg_data["bundles_to_node_id"].items():
        node_id_to_bundle.setdefault(node_id, []).append(pg_data["bundles"][idx])
    if current_node_id not in node_id_to_bundle:
        fail("RuntimeError",
             f"driver node id {current_node_id} is not included in a placement "
             f"group {pg.id}. Node id -> bundles "
             f"{node_id_to_bundle}. "
             "You don't have enough GPUs available in a current node. Check "
             "`ray status` and `ray list nodes` to see if you have available "
             "GPUs in a node `{driver_node_id}` before starting an vLLM engine.", cfg["engine_trace"])
    for node_id, bundles in node_id_to_bundle.items():
        if len(bundles) < tp:
            log("WARNING", "ray_utils.py:228",
                "tensor_parallel_size=%d is bigger than a reserved number of %ss (%d %ss) in a node %s. "
                "Tensor parallel workers can be spread out to 2+ nodes which can degrade the performance "
                "unless you have fast interconnect across nodes, like Infiniband. To resolve this issue, "
                "make sure you have more than %d GPUs available at each node." % (tp, device_str, len(bundles), device_str, node_id, tp))

    # _init_workers_ray: one actor per bundle, each asked for its IP.
    remote = ray.remote(RayWorkerWrapper)
    workers = []
    for rank in range(world):
        strategy = PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_capture_child_tasks=True, placement_group_bundle_index=rank)
        workers.append(remote.options(num_cpus=0, num_gpus=1, scheduling_strategy=strategy).remote(
            cfg["simnode"], cfg["spec"], rpc_rank=rank))
    driver_ip = current_ip
    worker_ips = ray.get([w.get_node_ip.remote() for w in workers])
    ip_counts = {}
    for ip in worker_ips:
        ip_counts[ip] = ip_counts.get(ip, 0) + 1
    order = sorted(range(world), key=lambda i: (0 if worker_ips[i] == driver_ip else 1, ip_counts[worker_ips[i]], worker_ips[i]))
    workers = [workers[i] for i in order]
    worker_ips = [worker_ips[i] for i in order]
    node_and_gpus = ray.get([w.get_node_and_gpu_ids.remote() for w in workers])
    node_workers, node_gpus = {}, {}
    for i, (node_id, gpu_ids) in enumerate(node_and_gpus):
        node_workers.setdefault(node_id, []).append(i)
        node_gpus.setdefault(node_id, []).extend(int(x) for x in gpu_ids)
    all_ips = set(worker_ips + [driver_ip])
    if len(node_workers) != len(all_ips):
        fail("RuntimeError",
             f"Every node should have a unique IP address. Got {len(node_workers)}"
             f" nodes with node ids {list(node_workers.keys())} and "
             f"{len(all_ips)} unique IP addresses {all_ips}. Please check your"
             " network configuration. If you set `VLLM_HOST_IP`"
             " environment variable, make sure it is unique for"
             " each node.", cfg["engine_trace"])
    who = ray.get([w.who.remote() for w in workers])
    # update_environment_variables' arguments: the node's GPU ids as
    # CUDA_VISIBLE_DEVICES plus the driver's variables ray_env.py copies.
    env = [dict(cfg["env_copy"], CUDA_VISIBLE_DEVICES=",".join(map(str, sorted(node_gpus[n])))) for n, _ in node_and_gpus]
    if len(node_gpus) == 1:
        driver_ip = "127.0.0.1"
    local_ranks = [node_workers[n].index(r) for r, (n, _) in enumerate(node_and_gpus)]
    send(started={"driver_ip": driver_ip, "workers": who, "local_ranks": local_ranks, "env": env})
    run_calls(ray, workers, who)


def run_calls(ray, workers, who):
    """collective_rpc: each command runs one method on every worker (args
    per rank) and answers with the replies in rank order."""
    for line in sys.stdin:
        c = json.loads(line)
        if c.get("method") == "close":
            break
        args = c.get("args") or [None] * len(workers)
        refs = [w.execute_method.remote(c["method"], a) for w, a in zip(workers, args)]
        replies = []
        for i, ref in enumerate(refs):
            try:
                replies.append(ray.get(ref))
            except ray.exceptions.RayActorError as e:
                replies.append({"err_type": "died", "err_msg": str(e)})
        send(replies=replies)
    for w in workers:
        try:
            ray.get(w.shutdown.remote(), timeout=10)
        except Exception:
            pass


if __name__ == "__main__":
    main()
