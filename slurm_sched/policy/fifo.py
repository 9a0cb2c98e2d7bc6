"""FIFO: arrival order, exclusive GPUs, non-preemptive, strict head-of-line blocking.

As in SJF-BSBF's evaluation (spec sjf-bsbf.md section 3) and the Tiresias simulator: scanning
stops at the first job that does not fit. Placement is consolidated packing.
"""

from __future__ import annotations

from slurm_sched.model import Action, ClusterSnapshot
from slurm_sched.policy.base import Policy
from slurm_sched.policy.queue_based import start_in_order


class Fifo(Policy):
    name = "fifo"
    paper = "baseline"
    summary = "first in, first out; exclusive GPUs; head-of-line blocking"

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        return start_in_order(snapshot, snapshot.pending, blocking=True, reason="fifo order")


POLICIES = [Fifo]
