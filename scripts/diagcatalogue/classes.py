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


# ---- The layers under vLLM and Ray (layers.py) ------------------------------
#
# Each layer's catalogue holds every error code or message of the layer's
# own source (a header's enum with its documented meaning, the library's
# own error string, the loader's and linker's format strings), each mapped
# to one class by its code's name; a code no specific class claims goes to
# the layer's own class, whose fix is that layer's next diagnostic step.
# The classes below are those no rule of rayform's or class above already
# defines; an entry may also name one of those (driver-too-old, ...).

LAYER_CLASSES = [
    {"id": "cuda-oom", "domain": "cuda", "layer": "CUDA",
     "title": "the GPU ran out of memory (a CUDA allocation failed)",
     "fix": "Layer: CUDA. On the host that printed it, nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv shows what holds the GPU's memory; free it, or ask for less: lower gpu_memory_utilization, max_model_len or max_num_seqs, or spread the model over more GPUs."},
    {"id": "gpu-busy", "domain": "cuda", "layer": "CUDA",
     "title": "the GPU is busy or unavailable to this process (exclusive compute mode, or held by another process)",
     "fix": "Layer: CUDA. On the host that printed it: nvidia-smi -q -d COMPUTE shows the compute mode (set Default with nvidia-smi -c DEFAULT) and nvidia-smi --query-compute-apps=pid,process_name --format=csv the process that holds the GPU; stop it, or give this process another GPU."},
    {"id": "gpu-fabric-not-ready", "domain": "cuda", "layer": "CUDA",
     "title": "the GPU system is not initialised (on NVSwitch systems: the fabric manager is not running)",
     "fix": "Layer: the NVIDIA driver. On the host that printed it: systemctl status nvidia-fabricmanager (it must run, at the driver's exact version: nvidia-smi), journalctl -u nvidia-fabricmanager for its error, and nvidia-smi -q | grep -i fabric for the GPUs' fabric state."},
    {"id": "gpu-hardware-fault", "domain": "cuda", "layer": "GPU hardware",
     "title": "the GPU reported a hardware fault (uncorrectable ECC, NVLink, or the GPU fell off the bus)",
     "fix": "Layer: the GPU hardware. On the host that printed it: dmesg -T | grep -i xid names the fault (Xid 48/63/64/79/94/95: memory, bus, NVLink), nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER the GPU's error counts; drain that GPU (CUDA_VISIBLE_DEVICES without it), reset it (nvidia-smi -r -i N) or reboot, and have a faulting GPU replaced."},
    {"id": "cuda-kernel-fault", "domain": "cuda", "layer": "CUDA",
     "title": "a GPU kernel faulted (an illegal memory access, a device-side assert, a launch failure)",
     "fix": "Layer: CUDA kernels. On the host that printed it, rerun with CUDA_LAUNCH_BLOCKING=1 (the traceback then names the kernel that faulted) and read dmesg -T | grep -i xid: Xid 13/31/43 are software faults (the kernel, the model or the vLLM/torch/CUDA versions: try --enforce-eager, another attention backend, another release), Xid 48/63/64/79 are hardware (see gpu-hardware-fault)."},
    {"id": "cuda-error", "domain": "cuda", "layer": "CUDA",
     "title": "a CUDA call failed",
     "fix": "Layer: CUDA. On the host that printed it: nvidia-smi (the driver and its CUDA version, the GPUs, their processes), dmesg -T | grep -i xid (the kernel's GPU faults), then rerun the process with CUDA_LAUNCH_BLOCKING=1 so the error names the call that failed; the code's documented meaning is above."},
    {"id": "driver-library-mismatch", "domain": "nvml", "layer": "the NVIDIA driver",
     "title": "the NVIDIA kernel module and the driver's libraries differ (a driver upgraded without reloading the module)",
     "fix": "Layer: the NVIDIA driver. On the host that printed it: cat /proc/driver/nvidia/version (the loaded module) against the user-space driver nvidia-smi and the container mount (nvidia-container-cli info) report; reboot the host (or unload and reload the nvidia modules) so both are the installed version."},
    {"id": "nvml-error", "domain": "nvml", "layer": "NVML",
     "title": "an NVML (NVIDIA management library) call failed",
     "fix": "Layer: NVML. On the host that printed it, run nvidia-smi on the host and inside the container (docker exec <container> nvidia-smi): the same error there names the driver's state; the code's documented meaning is above."},
    {"id": "nccl-cuda-error", "domain": "nccl", "layer": "NCCL",
     "title": "NCCL failed on a CUDA call",
     "fix": "Layer: NCCL over CUDA. Rerun with NCCL_DEBUG=INFO on every host: NCCL's WARN line (\"Cuda failure '...'\") names the CUDA error of the rank that failed; then follow that CUDA error (nvidia-smi and dmesg -T | grep -i xid on that host)."},
    {"id": "nccl-remote-error", "domain": "nccl", "layer": "NCCL",
     "title": "NCCL lost a peer: a remote rank exited or the network between them failed",
     "fix": "Layer: NCCL, cause on another rank. Read the logs of the other hosts for the first rank that failed (its own error is the cause); if none failed, rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET on every host and check the link between them (ping and iperf3 over the fabric; ibv_devinfo / ib_write_bw on InfiniBand)."},
    {"id": "nccl-invalid-usage", "domain": "nccl", "layer": "NCCL",
     "title": "NCCL refused how it was called (invalid usage or argument)",
     "fix": "Layer: NCCL. Rerun with NCCL_DEBUG=WARN on every host: its WARN line says what was invalid (often two ranks on one GPU, \"Duplicate GPU detected\": check each rank's CUDA_VISIBLE_DEVICES and nvidia-smi -L on each host)."},
    {"id": "nccl-error", "domain": "nccl", "layer": "NCCL",
     "title": "an NCCL call failed",
     "fix": "Layer: NCCL. Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET on every host and read the first WARN of the first rank that printed one: it names the transport and call that failed."},
    {"id": "loader-missing-library", "domain": "loader", "layer": "the dynamic loader",
     "title": "a shared library could not be loaded (not found)",
     "fix": "Layer: the dynamic loader. In the container on the host that printed it: ldconfig -p | grep <library> and ls $(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib; a driver library (libcuda, libnvidia-ml) missing means the container was started without the GPU runtime (docker run --gpus all); a CUDA library (libcudart, libcublas, libcudnn, libnccl) means the image lacks the CUDA runtime its torch or extension was built for."},
    {"id": "loader-undefined-symbol", "domain": "loader", "layer": "the dynamic loader",
     "title": "a compiled extension needs a symbol its libraries do not have (built against another version)",
     "fix": "Layer: compiled extensions. In the container on the host that printed it: python3 -c 'import torch;print(torch.__version__, torch.version.cuda)' and pip show <the extension>; install the extension's build for exactly that torch and CUDA (or rebuild it: pip install --no-build-isolation --force-reinstall <package>)."},
    {"id": "loader-version-not-found", "domain": "loader", "layer": "the dynamic loader",
     "title": "a binary needs a newer system library version (GLIBC / GLIBCXX / CXXABI) than the image has",
     "fix": "Layer: the image's system libraries. In the container on the host that printed it: ldd --version and strings $(ldconfig -p | awk '/libstdc\\+\\+.so.6 /{print $NF; exit}') | grep GLIBCXX_ list what it has; use an image with a newer base (glibc, libstdc++), or the package's build for this manylinux."},
    {"id": "loader-bad-library", "domain": "loader", "layer": "the dynamic loader",
     "title": "a shared library is not loadable on this machine (wrong architecture, truncated or not an ELF file)",
     "fix": "Layer: the dynamic loader. In the container on the host that printed it: file <library> and uname -m; reinstall the package built for this architecture (an x86_64 wheel on aarch64, a partial download)."},
    {"id": "link-missing-library", "domain": "loader", "layer": "the linker (a JIT build)",
     "title": "a build at run time (Triton, a JIT extension) could not link a library",
     "fix": "Layer: the linker of a run-time build. In the container on the host that printed it: ldconfig -p | grep <library>; for -lcuda, the driver's libcuda.so.1 is mounted but not the libcuda.so link: point Triton at it (TRITON_LIBCUDA_PATH=/usr/lib/x86_64-linux-gnu or where ldconfig finds it) or add the link (ln -s libcuda.so.1 libcuda.so) in the image."},
    {"id": "weights-corrupt", "domain": "weights", "layer": "the weight files",
     "title": "a weight file is truncated or not a safetensors file",
     "fix": "Layer: the weight files on disk. On the host that printed it: ls -l the model's *.safetensors in the Hugging Face cache against the sizes the Hub lists, sha256sum them against the Hub's LFS hashes, head -c 200 one of them (a Git LFS pointer starts with 'version https://git-lfs'), df -h the cache's disk; then fetch them again (huggingface-cli download <repo> --force-download)."},
    {"id": "weights-error", "domain": "weights", "layer": "the weight files",
     "title": "a weight file could not be read",
     "fix": "Layer: the weight files on disk. On the host that printed it: ls -l and sha256sum the model's weight files against the Hub's listing, and check the model's format matches what the loader expects (vllm serve --load-format)."},
    {"id": "hf-rate-limited", "domain": "hub", "layer": "the Hugging Face Hub",
     "title": "the Hugging Face Hub rate-limited the requests (HTTP 429)",
     "fix": "Layer: the Hub as a service. Authenticate (HF_TOKEN: an authenticated client has a higher limit), download once and share the cache (huggingface-cli download <repo> on one host, mount the cache on every node), or wait the time the message names."},
    {"id": "hf-file-not-found", "domain": "hub", "layer": "the Hugging Face Hub",
     "title": "the repository exists but lacks the file or revision asked for",
     "fix": "Layer: the Hub repository's contents. From the host: huggingface-cli repo-files <repo> (or the repository's Files tab) lists what it holds; fix the revision (--revision), the file name or the format the loader asked for (--load-format, --tokenizer)."},
    {"id": "hf-timeout", "domain": "hub", "layer": "the Hugging Face Hub",
     "title": "a request to the Hugging Face Hub timed out",
     "fix": "Layer: the network to the Hub. From the host that printed it: curl -sSI https://huggingface.co/api/models/<repo> (and through the proxy HTTPS_PROXY names); raise HF_HUB_DOWNLOAD_TIMEOUT / HF_HUB_ETAG_TIMEOUT, or download ahead of time and start with HF_HUB_OFFLINE=1."},
]

# CUDA_CLASS maps a cudaError_t / CUresult name to its class (first match);
# the runtime's and the driver's names of one code map alike.
CUDA_CLASS = [
    (r"InsufficientDriver|SystemDriverMismatch|SYSTEM_DRIVER_MISMATCH|CompatNotSupportedOnDevice|COMPAT_NOT_SUPPORTED_ON_DEVICE|UnsupportedPtxVersion|UNSUPPORTED_PTX_VERSION|CallRequiresNewerDriver", "driver-too-old"),
    (r"NoKernelImageForDevice|NO_BINARY_FOR_GPU|InvalidDeviceFunction", "cuda-arch-unsupported"),
    (r"NoDevice$|InvalidDevice$|StubLibrary|NO_DEVICE$|INVALID_DEVICE$|STUB_LIBRARY", "gpu-not-visible"),
    (r"DevicesUnavailable|DEVICE_UNAVAILABLE", "gpu-busy"),
    (r"SystemNotReady|SYSTEM_NOT_READY", "gpu-fabric-not-ready"),
    (r"ECCUncorrectable|ECC_UNCORRECTABLE|NvlinkUncorrectable|NVLINK_UNCORRECTABLE|HardwareStackError|HARDWARE_STACK_ERROR", "gpu-hardware-fault"),
    (r"MemoryAllocation$|OUT_OF_MEMORY$", "cuda-oom"),
    (r"IllegalAddress|ILLEGAL_ADDRESS|cudaErrorAssert$|CUDA_ERROR_ASSERT$|LaunchFailure$|LAUNCH_FAILED$|MisalignedAddress|MISALIGNED_ADDRESS|IllegalInstruction|ILLEGAL_INSTRUCTION|InvalidPc|INVALID_PC|LaunchTimeout|LAUNCH_TIMEOUT", "cuda-kernel-fault"),
    (r".", "cuda-error"),
]

NVML_CLASS = [
    (r"LIB_RM_VERSION_MISMATCH", "driver-library-mismatch"),
    (r"DRIVER_NOT_LOADED|LIBRARY_NOT_FOUND|GPU_NOT_FOUND", "gpu-not-visible"),
    (r"GPU_IS_LOST|RESET_REQUIRED|CORRUPTED_INFOROM|IRQ_ISSUE|INSUFFICIENT_POWER", "gpu-hardware-fault"),
    (r".", "nvml-error"),
]

NCCL_CLASS = [
    (r"ncclUnhandledCudaError", "nccl-cuda-error"),
    (r"ncclRemoteError", "nccl-remote-error"),
    (r"ncclInvalidArgument|ncclInvalidUsage", "nccl-invalid-usage"),
    # ncclSystemError ("unhandled system error") is the nccl-system-error
    # rule's (rules_distributed.go), which reads NCCL's WARN lines around it.
    (r"ncclInternalError", "nccl-error"),
]

# The loader's and the linker's format strings (printf's %s as {name}), as
# a program prints them, and the class of each; layers.py checks each
# format string is in the installed binary.
LOADER_MESSAGES = [
    # elf/dl-load.c, printed by dlerror as "<object>: <message>: <strerror>".
    ("ld.so", "cannot open shared object file", "{library}: cannot open shared object file", "loader-missing-library"),
    # elf/dl-lookup.c
    ("ld.so", "undefined symbol: %s%s%s", "undefined symbol: {symbol}", "loader-undefined-symbol"),
    # elf/dl-version.c
    ("ld.so", "version `%s' not found (required by %s)", "version `{version}' not found (required by {object})", "loader-version-not-found"),
    # elf/dl-load.c
    ("ld.so", "wrong ELF class: ELFCLASS32", "{library}: wrong ELF class: ELFCLASS32", "loader-bad-library"),
    ("ld.so", "invalid ELF header", "{library}: invalid ELF header", "loader-bad-library"),
    # ld/ldfile.c
    ("ld", "%P: cannot find %s: %E", "{program}: cannot find -l{library}: {error}", "link-missing-library"),
]

# SAFETENSORS_CLASS maps a SafeTensorError variant to its class.
SAFETENSORS_CLASS = [
    (r"Header|MetadataIncompleteBuffer|InvalidOffset|TensorInvalidInfo|ValidationOverflow", "weights-corrupt"),
    (r".", "weights-error"),
]

# HUB_CLAIMS: huggingface_hub's message lines each class claims.
HUB_CLAIMS = [
    (r"429 Too Many Requests", "hf-rate-limited"),
    (r"(?:Entry|Revision) Not Found for url", "hf-file-not-found"),
    (r"^(?:Read timed out|Connection to \{.*timed out)", "hf-timeout"),
]

# HUB_REQUIRES: what a line of a package that is not the Hub's own client
# (urllib3's timeouts) must also show to be about the Hub.
HUB_REQUIRES = {"urllib3": r"huggingface\.co|hf\.co|HF_HUB|huggingface_hub"}

# HUB_URL: requests' "for url: {url}" naming the Hub: huggingface_hub's
# default endpoint's host (huggingface.co, hf.co and their subdomains: the
# CDN, the staging hub), or any host (an HF_ENDPOINT mirror) with the paths
# huggingface_hub asks for: a file, ENDPOINT + "/{repo_id}/resolve/..."
# (constants.py), or the API, endpoint + "/api/{repo_type}s/{repo_id}"
# (hf_api.py). HUB_FILE_URL: one that names a file or a revision (resolve,
# /revision/, /tree/): a 404 there is the file's or the revision's, not the
# repository's (the Hub answers a repository it does not show an anonymous
# client with 401, the hf-access rule's). layers.py checks each piece of
# HUB_URL_SOURCE is in the Hub wheel's file.
HUB_URL = (r"for url: https?://(?:[\w.-]+\.)?(?:huggingface\.co|hf\.co)/"
           r"|for url: https?://[^\s/]+/(?:api/(?:models|datasets|spaces)/|\S+/resolve/)")
HUB_FILE_URL = r"for url: https?://[^\s/]+/(?:\S+/resolve/|api/(?:models|datasets|spaces)/\S+/(?:revision|tree)/)"
HUB_URL_SOURCE = [
    ("huggingface_hub/constants.py", '_HF_DEFAULT_ENDPOINT = "https://huggingface.co"'),
    ("huggingface_hub/constants.py", 'os.getenv("HF_ENDPOINT"'),
    ("huggingface_hub/constants.py", '"/{repo_id}/resolve/{revision}/{filename}"'),
    ("huggingface_hub/hf_api.py", '/api/{repo_type}s/{repo_id}/tree/{revision}'),
    ("huggingface_hub/hf_api.py", '/api/models/{repo_id}/revision/'),
]

# REQUESTS_STATUS: the HTTP statuses of requests' HTTPError line
# (raise_for_status) with a Hub class, and the URL each must name: huggingface_hub
# before its own error classes (and its callers since) printed requests'
# line first, "429 Client Error: Too Many Requests for url: ...".
REQUESTS_STATUS = [
    (429, "hf-rate-limited", HUB_URL),
    (404, "hf-file-not-found", HUB_FILE_URL),
]


def layer_class(table, name):
    """The class a layer's table gives a code's name, or None."""
    for pat, cls in table:
        if re.search(pat, name):
            return cls
    return None

# Messages of closed sources the layers print, with their provenance (no
# file to hash: "sha256" is empty).
LAYER_MANUAL = [
    {"package": "nvidia-smi", "version": "any", "source": "nvidia-smi (closed source): \"Failed to initialize NVML: \" + nvmlErrorString(NVML_ERROR_LIB_RM_VERSION_MISMATCH)",
     "sha256": "", "layer": "NVML", "kind": "error-string", "code": "NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18",
     "meaning": "RM detects a driver/library version mismatch", "template": "Failed to initialize NVML: Driver/library version mismatch", "class": "driver-library-mismatch"},
    {"package": "nvidia-smi", "version": "any", "source": "nvidia-smi (closed source): \"Failed to initialize NVML: \" + nvmlErrorString(code)",
     "sha256": "", "layer": "NVML", "kind": "error-string", "code": "",
     "meaning": "nvmlInit failed", "template": "Failed to initialize NVML: {reason}", "class": "nvml-error"},
    # nvidia-container-cli (the container hook) reports an NVML call that
    # failed as "nvml error: " + nvmlErrorString(code) (src/driver.c's NVML
    # call macro: error_set_nvml(err, nvml_dl, r, "nvml error"); src/error.c's
    # error_set_nvml appends the library's nvmlErrorString), lower-cased
    # as the hook prints its errors ("initialization error: nvml error:
    # driver not loaded"). The NVML string is the closed library's.
    {"package": "libnvidia-container", "version": "src/driver.c@947344949f26, src/error.c@417f41c725d0",
     "source": "src/driver.c (error_set_nvml(..., \"nvml error\")) + src/error.c (\": \" + nvmlErrorString(NVML_ERROR_LIB_RM_VERSION_MISMATCH), libnvidia-ml: closed source), printed lower-cased by nvidia-container-cli",
     "sha256": "", "layer": "NVML", "kind": "error-string", "code": "NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18",
     "meaning": "RM detects a driver/library version mismatch", "template": "nvml error: driver/library version mismatch", "class": "driver-library-mismatch"},
]
