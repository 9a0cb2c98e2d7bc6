"""SRTF: shortest remaining time first, preemptive (an oracle: reads the true duration).

Every cycle, all active jobs are ordered by remaining isolated time (ties: submit time); the
shortest ones that fit by GPU count run, the rest are preempted (checkpoint + requeue). Running
jobs keep their GPUs; newly started ones are packed consolidated where possible.
"""

from __future__ import annotations

from slurm_sched.model import Action, ClusterSnapshot
from slurm_sched.policy.base import Policy
from slurm_sched.policy.placement import pack_consolidated
from slurm_sched.policy.queue_based import preemptive_by_key


class Srtf(Policy):
    name = "srtf"
    paper = "baseline"
    summary = "shortest remaining time first (oracle); preemptive; exclusive GPUs"
    clairvoyant = True

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        return preemptive_by_key(
            snapshot,
            lambda j: (j.remaining_s(now_s), j.spec.submit_time_s, j.spec.job_id),
            packer=pack_consolidated,
            reason="srtf: shorter remaining time",
        )


POLICIES = [Srtf]
