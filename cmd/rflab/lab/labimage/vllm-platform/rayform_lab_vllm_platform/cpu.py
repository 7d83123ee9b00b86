"""vLLM's CPU platform with a Ray device key and a communicator that keeps
shared memory to the ranks of one host (see __init__.py)."""

from vllm.platforms.cpu import CpuPlatform


class LabCpuPlatform(CpuPlatform):
    ray_device_key: str = "GPU"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        """vLLM's CpuCommunicator with shared memory only between ranks on
        one host (communicator.py)."""
        return "rayform_lab_vllm_platform.communicator.LabCpuCommunicator"
