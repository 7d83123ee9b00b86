#!/usr/bin/env bash
# Issue #16 on a lent GPU machine (run as root from the repository root; writes into $OUT): rayform's data-plane check script, unchanged, under the env
# rayform pins, in two network namespaces joined by a veth "fabric" and a "management" veth.
set -u
cd "$(dirname "$0")/../../.."  # the repository root
SCRIPT=${SCRIPT:-resources/dataplane/check.py}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# iproute2 may be missing there: IP_DIR names a folder with an ip binary and its lib/ (Debian's, carried along).
IP_DIR=${IP_DIR:-$PWD/.gpu}
ip() { if [ -x "$IP_DIR/ip" ]; then LD_LIBRARY_PATH=$IP_DIR/lib "$IP_DIR/ip" "$@"; else command ip "$@"; fi; }
PY=$(command -v python3)
echo "== machine"; nvidia-smi -L; uname -r
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())'
echo "== namespaces"
ip netns add gx1 && ip netns add gx2 || exit 1
ip link add enp1s0f1np1 netns gx1 type veth peer name enp1s0f1np1 netns gx2
ip link add eth0 netns gx1 type veth peer name eth0 netns gx2
ip -n gx1 addr add 192.168.200.12/24 dev enp1s0f1np1; ip -n gx2 addr add 192.168.200.13/24 dev enp1s0f1np1
# management: the head's management address is not reachable from the worker (as in the seeds)
ip -n gx1 addr add 10.1.230.180/24 dev eth0; ip -n gx2 addr add 10.1.231.181/24 dev eth0
for n in gx1 gx2; do ip -n $n link set lo up; ip -n $n link set enp1s0f1np1 up; ip -n $n link set eth0 up; done
ip -n gx2 route; ip -n gx1 -br addr
pin() { # the env rayform pins in a node's container
  echo NCCL_SOCKET_IFNAME=enp1s0f1np1 GLOO_SOCKET_IFNAME=enp1s0f1np1 TP_SOCKET_IFNAME=enp1s0f1np1 NCCL_IB_DISABLE=1 VLLM_HOST_IP=$1 NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; }
run2() { # name world backends master extra0 extra1
  local name=$1 world=$2 be=$3 master=$4 x0=$5 x1=$6
  echo; echo "== case: $name"
  local t0=$(date +%s.%N)
  ip netns exec gx1 env $(pin 192.168.200.12) $x0 RAYFORM_CHECK_NODE=gx1 $PY $SCRIPT --rank 0 --world-size $world --master-addr 192.168.200.12 --master-port 29417 --backends $be --timeout 10 --size-mb 64 --device 0 >$OUT/$name-gx1.out 2>$OUT/$name-gx1.err &
  local p0=$!
  if [ "$world" = 2 ]; then
    ip netns exec gx2 env $(pin 192.168.200.13) $x1 RAYFORM_CHECK_NODE=gx2 $PY $SCRIPT --rank 1 --world-size 2 --master-addr $master --master-port 29417 --backends $be --timeout 10 --size-mb 64 --device 0 >$OUT/$name-gx2.out 2>$OUT/$name-gx2.err
    echo "gx2 exit $?"
  fi
  wait $p0; echo "gx1 exit $?"
  echo "elapsed $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || true)"
  for f in $OUT/$name-*.out; do echo "-- $f"; cat $f; done
  for f in $OUT/$name-*.err; do echo "-- $f (NCCL/c10d lines)"; grep -E "NCCL|c10d|Error|error|Using|refused|unreachable|timed out" $f | grep -v '^\s*frame #' | head -25; done
}
run2 good-gloo-2ranks 2 gloo 192.168.200.12 "" ""
run2 good-nccl-1rank 1 nccl 192.168.200.12 "" ""
run2 nccl-2ranks-one-gpu 2 gloo,nccl 192.168.200.12 "" ""
run2 bad-nccl-ifname 2 gloo,nccl 192.168.200.12 "NCCL_SOCKET_IFNAME=enp9s0" "NCCL_SOCKET_IFNAME=enp9s0"
run2 bad-nccl-ifname-1rank 1 nccl 192.168.200.12 "NCCL_SOCKET_IFNAME=enp9s0" ""
run2 unreachable-master 2 gloo,nccl 10.1.230.180 "" ""
ip netns del gx1; ip netns del gx2
(cd $OUT && tar czf cases.tgz *.out *.err && rm -f *.out *.err)
