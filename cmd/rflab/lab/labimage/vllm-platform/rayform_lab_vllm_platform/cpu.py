"""vLLM's CPU platform with a Ray device key and a communicator that keeps
shared memory to the ranks of one host (see __init__.py), made to run
where the lab's NVML shim reports GPUs that CUDA cannot reach."""

import os

from vllm.platforms.cpu import CpuPlatform

# torch.cuda.is_available() must be false in vLLM's processes here, as on
# any CPU host. `import vllm` (vllm/env_override.py) sets
# PYTORCH_NVML_BASED_CUDA_CHECK=1, which has torch answer it from NVML
# (torch.cuda.device_count() > 0) instead of CUDA's runtime, so that the
# question never initialises CUDA. On a CPU host there is no NVML and the
# answer is false; the lab's nodes have the lab's NVML (libnvidia-ml.so.1,
# labimage/libnvidia-ml.c), which reports the node's GPUs so that Ray
# counts them, and no CUDA driver. torch then believes CUDA is available,
# and the first torch.compile'd function (vocab_parallel_embedding's
# get_masked_input_and_mask, which TP > 1 runs at the first request) fails
# in dynamo's state guard (torch/_dynamo/convert_frame.py), which saves
# torch.cuda.get_rng_state() whenever CUDA is available: "Found no NVIDIA
# driver on your system". Without the variable torch asks CUDA's runtime,
# which finds no driver and answers false without raising. Every process
# that resolves vLLM's platform imports this module after `import vllm`
# (vllm/__init__.py imports env_override first), so this runs after vLLM
# set the variable, in the API server, the engine core and each Ray worker.
os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)


class LabCpuPlatform(CpuPlatform):
    ray_device_key: str = "GPU"

    # torch.compile's backend for vLLM's small compiled helpers
    # (@torch.compile(backend=current_platform.simple_compile_backend):
    # the masked embedding lookup of TP > 1, the sampler's top-k/top-p,
    # logprobs). vLLM's CPU platform keeps "inductor", which generates C++
    # and compiles it with g++ at run time; the lab image has no C++
    # compiler (vLLM's CPU images have one), so inductor fails with
    # "InvalidCxxCompiler". "eager" runs the graph dynamo captured as it
    # is, generating no code. (--enforce-eager, in the lab's serve,
    # does the same for the model itself.)
    simple_compile_backend: str = "eager"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        """vLLM's CpuCommunicator with shared memory only between ranks on
        one host (communicator.py)."""
        return "rayform_lab_vllm_platform.communicator.LabCpuCommunicator"
