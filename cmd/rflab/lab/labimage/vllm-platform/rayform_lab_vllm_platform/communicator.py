"""vLLM's CPU communicator, with shared memory only between ranks on one
host (see __init__.py).

vLLM's CpuCommunicator takes its shared-memory all-reduce (_CPUSHMDistributed,
a segment in /dev/shm) for a tp or pp group whose ranks agree on one group
name. The CPU worker derives that name from VLLM_DIST_IDENT, which it sets
from the rendezvous port: every rank of a multi-host group has the same one,
so ranks on different hosts agree too, and the ranks on other hosts then
fail to open the first host's segment ("open shm in SHMManager failed.
errno: 2"). Here the ranks also compare their hosts' shared memory, and
agree only if they are on one host, in one /dev/shm; otherwise vLLM logs
"CPU SHM communicator disabled for group ..." and uses torch.distributed
(Gloo), as it does when the names differ.
"""

import os

import torch

from vllm.distributed.device_communicators.cpu_communicator import (
    CpuCommunicator,
    _CPUSHMDistributed,
)
from vllm.logger import init_logger

# Under vLLM's "vllm" logger, whose handler and level vLLM configures (a
# logger outside it would print only warnings).
logger = init_logger("vllm.rayform_lab_platform")


def shared_memory_identity():
    """Names the shared memory this process's segments land in: the
    kernel's boot id (differs between hosts) and /dev/shm's device and
    inode (differs between containers or lab nodes of one kernel that each
    have their own /dev/shm). None if it cannot be read: then no rank
    shares shared memory with another."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.read().strip()
        st = os.stat("/dev/shm")
    except OSError:
        return None
    return (boot_id, st.st_dev, st.st_ino)


class LabCpuCommunicator(CpuCommunicator):
    def _all_group_ranks_share_shm_group_name(self) -> bool:
        """Every rank agrees on one SHM group name (vLLM's check) and sees
        the same shared memory. One all_gather_object on the device group,
        as vLLM's check: every rank of the group calls it."""
        local = (_CPUSHMDistributed.make_group_name(self), shared_memory_identity())
        gathered = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, local, group=self.device_group)
        names = {name for name, _ in gathered}
        places = {place for _, place in gathered}
        if len(names) == 1 and (len(places) != 1 or None in places):
            logger.info(
                "rayform lab: ranks of group %s agree on the SHM group name but "
                "not on the shared memory (%d places: %s): no CPU SHM communicator.",
                self.unique_name,
                len(places),
                sorted(places, key=repr),
            )
        return len(names) == 1 and len(places) == 1 and None not in places
