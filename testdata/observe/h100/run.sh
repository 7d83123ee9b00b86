#!/bin/bash
# issue 41 capture: rayform's host probe and the GPU stack facts, verbatim.
O=${OUT:-/tmp/out}; mkdir -p "$O"; cd "$(dirname "$0")"
x() { local n=$1; shift; { echo "\$ $*"; "$@"; echo "[exit $?]"; } >"$O/$n.txt" 2>&1; }
date -u +%Y-%m-%dT%H:%M:%SZ >"$O/date.txt"
x uname uname -a
x driver-version cat /proc/driver/nvidia/version
x smi-version nvidia-smi --version
x smi-table nvidia-smi
x smi-query9 nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,compute_cap,mig.mode.current --format=csv,noheader,nounits
x smi-query9-header nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,compute_cap,mig.mode.current --format=csv
x smi-query7 nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version --format=csv,noheader,nounits
x smi-badfield nvidia-smi --query-gpu=index,no_such_field --format=csv,noheader,nounits
x smi-fabric nvidia-smi --query-gpu=index,fabric.state,fabric.status --format=csv,noheader,nounits
x smi-q nvidia-smi -q
x smi-help-query nvidia-smi --help-query-gpu
x nvswitch ls -la /proc/driver/nvidia-nvswitch/devices /dev/
x fm systemctl show -p LoadState -p ActiveState nvidia-fabricmanager
x fm-ps sh -c 'ps -eo pid,comm,args | grep -i -e fabric -e nv-fabric | grep -v grep'
x ldconfig sh -c 'ldconfig -p | grep -i -e libcuda -e libnvidia-ml'
x compat sh -c 'ls -la /usr/local/cuda*/compat /usr/local/cuda*/ 2>&1; echo LD_LIBRARY_PATH=$LD_LIBRARY_PATH'
x torch python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_arch_list(), torch.cuda.get_device_capability(), torch.cuda.nccl.version(), torch.cuda.get_device_name(0), torch._C._cuda_getArchFlags())'
x pip sh -c 'python3 -m pip list 2>/dev/null | grep -i -e torch -e nccl -e vllm -e cuda'
x cudaquery python3 cudaquery.py
x fatbin-torch python3 -c 'import runpy,os,torch; g=runpy.run_path("cudaquery.py"); p=os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cuda.so"); print(p, g["fatbin_archs"](p))'
x smi-time sh -c 'time nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,compute_cap,mig.mode.current --format=csv,noheader,nounits; time nvidia-smi --version'
x probe ./gpuprobe "$O"
x probe-again ./gpuprobe "$O/again"
mkdir -p "$O/again" && ./gpuprobe "$O/again" >"$O/probe-again.txt" 2>&1
RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29417 NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0 timeout 120 python3 check.py --backends gloo,nccl --timeout 30 --size-mb 8 >"$O/dataplane-nccl-1rank.out" 2>"$O/dataplane-nccl-1rank.err"; echo "exit $?" >>"$O/dataplane-nccl-1rank.out"
