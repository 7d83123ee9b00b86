#!/bin/bash
# Reproduces the seeds' c10d failure (the head registered in Ray under its
# management address, the worker with a route only to the fabric) with the
# lab's real vLLM 0.32.0 and torch 2.13, and writes c10d-mgmt-address.log.
# Two network namespaces shaped like the seeds' DGX Sparks: spark1 has the
# management address 10.1.230.180 and the fabric 192.168.200.12, spark2
# only the fabric 192.168.200.13 (no route to 10.1.230.0/24). Each runs one
# tensor-parallel rank through vLLM's own init_distributed_environment
# (what each of vLLM's Ray workers runs) with the init method vLLM's Ray
# executor builds from the driver's Ray node IP, tcp://10.1.230.180:55053.
# Ray itself is not started: its part, registering the head under that
# address, is what the init method stands for. Traffic stays inside the
# namespaces made here.
#
# Usage (root): VLLM_SITE=<dist-packages of the lab's vLLM layer> testdata/realvllm/c10d-mgmt-address.sh
set -euo pipefail
site=${VLLM_SITE:?"the dist-packages directory of the lab image's vLLM and Ray layers"}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
cleanup() { for n in rvf-s1 rvf-s2 rvf-mg; do ip netns del $n 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for n in rvf-s1 rvf-s2 rvf-mg; do ip netns add $n; ip -n $n link set lo up; done
ip link add rvf-f1 type veth peer name rvf-f2
ip link set rvf-f1 netns rvf-s1; ip link set rvf-f2 netns rvf-s2
ip -n rvf-s1 addr add 192.168.200.12/24 dev rvf-f1; ip -n rvf-s2 addr add 192.168.200.13/24 dev rvf-f2
ip link add rvf-m1 type veth peer name rvf-m0
ip link set rvf-m1 netns rvf-s1; ip link set rvf-m0 netns rvf-mg
ip -n rvf-s1 addr add 10.1.230.180/24 dev rvf-m1; ip -n rvf-mg addr add 10.1.230.1/24 dev rvf-m0
ip -n rvf-s1 link set rvf-f1 up; ip -n rvf-s2 link set rvf-f2 up; ip -n rvf-s1 link set rvf-m1 up; ip -n rvf-mg link set rvf-m0 up
cat > "$work/rank.py" <<'PY'
import datetime, sys
from vllm.distributed.parallel_state import init_distributed_environment
rank = int(sys.argv[1])
init_distributed_environment(world_size=2, rank=rank, distributed_init_method="tcp://10.1.230.180:55053",
                             local_rank=0, backend="gloo", timeout=datetime.timedelta(seconds=30))
print("rank", rank, "joined")
PY
export PYTHONPATH=$site
(ip netns exec rvf-s1 /usr/bin/python3 -S "$work/rank.py" 0 >"$work/spark1.log" 2>&1 || true) &
ip netns exec rvf-s2 /usr/bin/python3 -S "$work/rank.py" 1 >"$work/spark2.log" 2>&1 || true
wait
{
	echo "# source: the lab's real vLLM 0.32.0 (0.32.0+cpu, the lab image's vLLM and Ray layers) and torch 2.13.0 with Debian's python3 3.11, run by testdata/realvllm/c10d-mgmt-address.sh on $(date -u +%Y-%m-%d): rank 0 on spark1, rank 1 on spark2, vLLM's init_distributed_environment(world_size=2, backend=gloo, timeout=30s) with distributed_init_method tcp://10.1.230.180:55053 (the head's management address, as vLLM's Ray executor takes it from Ray's node IP); real torch c10d TCPStore and Gloo; no Ray, no vllm serve; each rank's output verbatim"
	echo "# cause: c10d-unreachable"
	echo "# log: spark2 | TP rank 1 (vLLM RayWorkerWrapper's distributed init)"
	cat "$work/spark2.log"
	echo "# log: spark1 | TP rank 0 (the driver's distributed init)"
	cat "$work/spark1.log"
} >"$here/c10d-mgmt-address.log"
