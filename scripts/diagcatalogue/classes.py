"""The cause classes of rayform's diagnose catalogue: which source messages
each claims (a regexp over the message's template), and the fix, written
once per class. scan.py keeps only the messages a class claims."""
import re

# Each class: id (the Cause rayform reports), domain (the rules file it
# belongs with), title, fix, and claims: (package regexp, template regexp).
CLASSES = [
    {"id": "kv-cache-too-small", "domain": "memory",
     "title": "the KV cache cannot hold max_model_len tokens",
     "fix": "Give the KV cache more memory or ask for less: raise gpu_memory_utilization (vllm serve --gpu-memory-utilization), lower max_model_len (--max-model-len), or spread the model over more GPUs (tensor_parallel_size / pipeline_parallel_size).",
     "claims": [("vllm", r"larger than the maximum number of tokens that can be stored in KV cache|No available memory for the cache blocks|larger than the available KV cache memory|exceeds available .*cache blocks|KV blocks, but only .* exist")]},
    {"id": "max-model-len-too-large", "domain": "serve",
     "title": "max_model_len is more than the model supports",
     "fix": "Lower max_model_len (--max-model-len) to at most the model's own limit (max_position_embeddings in its config.json), or, knowing the risk, set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
     "claims": [("vllm", r"User-specified max_model_len .* is greater than")]},
    {"id": "quantization-unsupported", "domain": "image",
     "title": "the quantization method is not supported on this GPU",
     "fix": "Use a checkpoint quantized with a method this GPU's compute capability supports (see vLLM's supported-hardware table for quantization), or an unquantized/bf16 model; on an older GPU, fp16 instead of bf16.",
     "claims": [("vllm", r"(?:quantization method|Quantization scheme) .*not supported for the current GPU|Minimum capability: .*Current capability|requires GPU compute capability")]},
    {"id": "trust-remote-code", "domain": "hub",
     "title": "the model needs trust_remote_code",
     "fix": "Add --trust-remote-code to vllm serve (trust_remote_code = true on the vllm_serve) if you trust the model repository's code.",
     "claims": [("vllm|transformers", r"Please set the option `?trust_remote_code=True`?|requires you to execute (?:custom code|the code|the configuration file)|set the option trust_remote_code|requires `trust_remote_code=True`|contains custom code which must be executed|references custom code contained in")]},
    {"id": "hf-offline", "domain": "hub",
     "title": "the Hugging Face Hub was queried in offline mode, and the files are not in the cache",
     "fix": "Either let the node reach the Hub (unset HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE) or put the model's files into the Hugging Face cache the container mounts (huggingface-cli download <repo> on that node) before starting.",
     "claims": [("huggingface_hub|transformers", r"offline mode is enabled|HF_HUB_OFFLINE|outgoing traffic has been disabled|Cannot find the requested files in the (?:disk )?cache|couldn't connect to .* to load")]},
    {"id": "ray-version-mismatch", "domain": "ray",
     "title": "the Ray (or Python) version differs between this process and the cluster",
     "fix": "Run the same Ray and Python version on every node and in the driver: use one image for the head, the workers and vllm serve (rayform does), or pin ray==<the cluster's version>.",
     "claims": [("ray", r"^Ray version mismatch")]},
    {"id": "driver-too-old", "domain": "image",
     "title": "the host's NVIDIA driver is too old for the image's CUDA",
     "fix": "Upgrade the NVIDIA driver on the host to one that supports the image's CUDA version (nvidia-smi shows the driver's CUDA), or use an image built for an older CUDA.",
     "claims": [("torch", r"NVIDIA driver on your system is too old|driver version is insufficient")]},
    {"id": "gpu-not-visible", "domain": "image",
     "title": "the process sees no GPU",
     "fix": "Start the container with the GPUs (docker run --gpus all, the NVIDIA container runtime), check CUDA_VISIBLE_DEVICES, and check nvidia-smi inside the container.",
     "claims": [("torch", r"Found no NVIDIA driver on your system"), ("vllm", r"Failed to infer device type")]},
    {"id": "module-missing", "domain": "image",
     "title": "a Python module is missing in the image",
     "fix": "Install the module in the image every node runs (the same image for the head, the workers and vllm serve), or use an image that has it.",
     "claims": []},
    {"id": "cuda-arch-unsupported", "domain": "image",
     "title": "the image's CUDA kernels were not built for this GPU",
     "fix": "Use an image built for this GPU's architecture (for GB10/DGX Spark, sm_121/ARM64 builds; for older GPUs, a release that still ships their kernels).",
     "claims": []},
    {"id": "nccl-shm", "domain": "distributed",
     "title": "NCCL could not create its shared memory segment in /dev/shm",
     "fix": "Give the container a larger /dev/shm (docker run --shm-size=16g or --ipc=host; rayform's ray_cluster sets shm_size), or disable the shared-memory transport with NCCL_SHM_DISABLE=1.",
     "claims": [("nccl", r"shared memory segment|/dev/shm")]},
    {"id": "nccl-ib", "domain": "distributed",
     "title": "NCCL's InfiniBand/RoCE transport failed",
     "fix": "On RoCE, set NCCL_IB_GID_INDEX to the GID index of the fabric's RoCE v2 IPv4 entry (show_gids) on every node, and NCCL_IB_HCA to the fabric's HCA; check the link with ib_write_bw between the nodes; or fall back to sockets with NCCL_IB_DISABLE=1.",
     "claims": [("nccl", r"^NET/IB ?: (?:Got completion|.*GID table|Unable to open|.*async fatal)|^Call to ibv_modify_qp failed")]},
    {"id": "nccl-socket", "domain": "distributed",
     "title": "NCCL's socket transport lost a peer",
     "fix": "Pin NCCL and Gloo to the fabric interface on every node (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME = the fabric netdev), check the peers reach each other on it (no firewall between the nodes), and read the peer's log: a peer that died closes the connection.",
     "claims": [("nccl", r"^NET/Socket : (?:No usable listening interface|no interface found|socket progress error|peer .* message truncated)|^socketProgress: Connection closed|^Call to connect returned")]},
    {"id": "ray-port-unreachable", "domain": "ray",
     "title": "a Ray process cannot reach one of Ray's ports on another node",
     "fix": "Open Ray's ports between the nodes on the fabric (the GCS port, the node manager and object manager ports, the worker port range: ray start --node-manager-port/--object-manager-port/--min-worker-port/--max-worker-port), or allow all traffic between the nodes' fabric addresses.",
     "claims": []},
]

# Messages of sources that are not Python packages, with their provenance;
# their templates are the sources' format strings (printf's %s as {name}).
MANUAL = [
    {"package": "ray", "version": "2.53.0", "source": "ray/_private/utils.py:1282 (check_version_info; the message is built in a variable)", "kind": "raise",
     "template": "Version mismatch: The cluster was started with:", "class": "ray-version-mismatch"},
    {"package": "cpython", "version": "3.12", "source": "Python/import.c (ModuleNotFoundError)", "kind": "raise",
     "template": "No module named {name}", "class": "module-missing"},
    {"package": "libnvidia-container", "version": "1.17", "source": "src/cli/dsl.c (error_setx in dsl_evaluate)", "kind": "error",
     "template": "unsatisfied condition: {condition}", "class": "driver-too-old"},
    {"package": "cuda-runtime", "version": "12.x", "source": "cudaGetErrorString(cudaErrorCompatNotSupportedOnDevice = 804)", "kind": "error",
     "template": "forward compatibility was attempted on non supported HW", "class": "driver-too-old"},
    {"package": "cuda-runtime", "version": "12.x", "source": "cudaGetErrorString(cudaErrorSystemDriverMismatch = 803)", "kind": "error",
     "template": "system has unsupported display driver / cuda driver combination", "class": "driver-too-old"},
    {"package": "cuda-runtime", "version": "12.x", "source": "cudaGetErrorString(cudaErrorInsufficientDriver = 35)", "kind": "error",
     "template": "CUDA driver version is insufficient for CUDA runtime version", "class": "driver-too-old"},
    {"package": "cuda-runtime", "version": "12.x", "source": "cudaGetErrorString(cudaErrorNoKernelImageForDevice = 209)", "kind": "error",
     "template": "no kernel image is available for execution on the device", "class": "cuda-arch-unsupported"},
    {"package": "grpc", "version": "1.x", "source": "src/core/lib/iomgr/tcp_client_posix.cc (as Ray's raylet logs an RPC failure)", "kind": "error",
     "template": "failed to connect to all addresses; last error: UNKNOWN: ipv4:{addr}: Failed to connect to remote host: {reason}", "class": "ray-port-unreachable"},
]

PREFILTER = ["Error", "error", "raise", "warning", "critical", "Exception"]


def classify(pkg, template):
    """The class id that claims a package's message template, or None."""
    for c in CLASSES:
        for p, t in c["claims"]:
            if re.fullmatch(p, pkg) and re.search(t, template):
                return c["id"]
    return None
