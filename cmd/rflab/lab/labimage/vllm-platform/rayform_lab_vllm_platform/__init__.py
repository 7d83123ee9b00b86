"""The rayform lab image's vLLM platform plugin, through vLLM's own
extension point for platforms (the `vllm.platform_plugins` entry point).

vLLM's CPU platform has no Ray device key, so its Ray executor refuses to
start ("current platform cpu does not support ray."). The lab's nodes are
CPU-only hosts that play GPU hosts: rayform starts each node's Ray with
--num-gpus, as on a GPU cluster. The plugin's platform (cpu.py) is vLLM's
CpuPlatform with the Ray device key "GPU": each rank of the Ray executor
takes one GPU bundle of the placement group, as on GPU hosts, and the CPU
worker ignores the GPU ids Ray gives it. ("CPU" is refused by Ray as a
custom resource name.) Nothing else changes.
"""


def register():
    """Names the platform class. vLLM prefers an activated out-of-tree
    platform plugin to its built-in detection, which finds the CPU
    platform here (the image's vLLM is versioned 0.32.0+cpu)."""
    return "rayform_lab_vllm_platform.cpu.LabCpuPlatform"
