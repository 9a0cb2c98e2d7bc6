"""SJF: shortest job first, exclusive, non-preemptive (an oracle: reads the true duration).

Pending jobs are sorted by the key (``duration`` by default; ``gpus`` or ``gpu_time`` as the
spec's ambiguity A3 allows); every job that fits starts, the others are skipped, not blocking.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from slurm_sched.model import Action, ClusterSnapshot, JobView
from slurm_sched.policy.base import Policy
from slurm_sched.policy.queue_based import start_in_order

SjfKey = Literal["duration", "gpus", "gpu_time"]


def sjf_sort_key(key: SjfKey) -> Callable[[JobView], tuple[float, float]]:
    def k(j: JobView) -> tuple[float, float]:
        if key == "duration":
            return (j.spec.duration_s, j.spec.submit_time_s)
        if key == "gpus":
            return (float(j.spec.num_gpus), j.spec.submit_time_s)
        return (j.spec.gpu_time_s, j.spec.submit_time_s)

    return k


class Sjf(Policy):
    name = "sjf"
    paper = "baseline"
    summary = "shortest job first (oracle durations); exclusive; non-preemptive; skips misfits"
    clairvoyant = True

    def __init__(self, key: SjfKey = "duration") -> None:
        if key not in ("duration", "gpus", "gpu_time"):
            raise ValueError(f"sjf key must be duration, gpus or gpu_time, got {key!r}")
        self.key = key

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        order = sorted(snapshot.pending, key=sjf_sort_key(self.key))
        return start_in_order(snapshot, order, blocking=False, reason=f"sjf by {self.key}")


POLICIES = [Sjf]
