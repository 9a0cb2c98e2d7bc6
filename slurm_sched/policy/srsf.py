"""SRSF: shortest remaining *service* first, preemptive (an oracle: reads the true duration).

Baseline of Muri (SIGCOMM'22) and Tiresias (NSDI'19, ``shortest-gpu`` in their simulators):
spec ``shared/specs/muri.md`` section 3. Exactly SRTF's loop with the key
``remaining isolated time x requested GPUs`` (the GPU-time still owed), so a wide job must be
proportionally shorter to go first. Ties: submit time, job id. Jobs that fit by GPU count run,
the rest are preempted; running jobs keep their GPUs, new ones are packed consolidated.

Deviation: the artifact re-places every job at every event (YARN, node by node); like the
framework's SRTF we count GPUs and keep running jobs in place.
"""

from __future__ import annotations

from slurm_sched.model import Action, ClusterSnapshot, JobView
from slurm_sched.policy.base import Policy
from slurm_sched.policy.placement import pack_consolidated
from slurm_sched.policy.queue_based import preemptive_by_key


def srsf_key(job: JobView, now_s: float) -> tuple[float, float, str]:
    """Remaining GPU-seconds, then submit time, then job id (lower runs first)."""
    spec = job.spec
    return (job.remaining_s(now_s) * spec.num_gpus, spec.submit_time_s, spec.job_id)


class Srsf(Policy):
    name = "srsf"
    paper = "baseline (Tiresias NSDI'19 / Muri SIGCOMM'22 'shortest-gpu')"
    summary = "shortest remaining GPU-service (time x GPUs) first (oracle); preemptive; exclusive"
    clairvoyant = True

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        return preemptive_by_key(
            snapshot,
            lambda j: srsf_key(j, now_s),
            packer=pack_consolidated,
            reason="srsf: less remaining GPU-time",
        )


POLICIES = [Srsf]
