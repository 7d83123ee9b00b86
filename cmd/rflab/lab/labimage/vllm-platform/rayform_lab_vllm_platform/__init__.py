"""The rayform lab image's vLLM platform plugin, through vLLM's own
extension point for platforms (the `vllm.platform_plugins` entry point).

vLLM's CPU platform has no Ray device key, so its Ray executor refuses to
start ("current platform cpu does not support ray."). The lab's nodes are
CPU-only hosts that play GPU hosts: rayform starts each node's Ray with
--num-gpus, as on a GPU cluster. The plugin's platform (cpu.py) is vLLM's
CpuPlatform with the Ray device key "GPU": each rank of the Ray executor
takes one GPU bundle of the placement group, as on GPU hosts, and the CPU
worker ignores the GPU ids Ray gives it. ("CPU" is refused by Ray as a
custom resource name.)

Its device communicator (communicator.py) is vLLM's CpuCommunicator, whose
shared-memory all-reduce needs every rank of a tp or pp group on one host,
with a check that they are: vLLM's own check compares only a group name
derived from the rendezvous port, which ranks on different hosts share, so
TP or PP across nodes would open a /dev/shm segment that exists only on one
of them ("open shm in SHMManager failed. errno: 2"). The plugin's check
also compares the host's boot id and /dev/shm (device and inode: each lab
node has its own /dev/shm), and where they differ vLLM falls back to
torch.distributed (Gloo), as it does by itself when the names differ.

Two things undo what only the lab's nodes cause (cpu.py): torch's
CUDA check, which vLLM has ask NVML, would believe the lab's NVML shim
(its GPUs are for Ray; there is no CUDA driver), so the platform's module
has torch ask CUDA's runtime instead; and vLLM's small torch.compile'd
helpers use the "eager" backend, since the image has no C++ compiler for
inductor. Nothing else changes.
"""


def register():
    """Names the platform class. vLLM prefers an activated out-of-tree
    platform plugin to its built-in detection, which finds the CPU
    platform here (the image's vLLM is versioned 0.32.0+cpu)."""
    return "rayform_lab_vllm_platform.cpu.LabCpuPlatform"
