"""vLLM's CPU platform with a Ray device key (see __init__.py)."""

from vllm.platforms.cpu import CpuPlatform


class LabCpuPlatform(CpuPlatform):
    ray_device_key: str = "GPU"
