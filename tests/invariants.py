"""A backend wrapper that checks cluster invariants after every apply (real backend underneath).

Checked after each cycle's actions:
- no GPU holds more than ``max_jobs_per_gpu`` jobs (1 for exclusive policies);
- a running or suspended job holds exactly the GPUs it asked for (gangs start whole), unless
  the policy is elastic (then it holds at least one);
- every placed GPU exists and has the job's required type.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurm_sched.backend import ClusterBackend
from slurm_sched.model import Action, ActionResult, ClusterSnapshot, CompletedJob, JobState


class InvariantViolation(AssertionError):
    pass


def check_snapshot(snap: ClusterSnapshot, max_jobs_per_gpu: int, exact_gangs: bool = True) -> None:
    by_name = snap.cluster.by_name
    for slot, holders in snap.occupancy.items():
        if len(holders) > max_jobs_per_gpu:
            raise InvariantViolation(f"GPU {slot} over-allocated: {holders}")
    for j in snap.jobs:
        if j.state is JobState.PENDING:
            if j.placement is not None:
                raise InvariantViolation(f"pending job {j.job_id} holds GPUs")
            continue
        if j.placement is None:
            raise InvariantViolation(f"{j.state} job {j.job_id} has no placement")
        if exact_gangs and j.placement.num_gpus != j.spec.num_gpus:
            raise InvariantViolation(
                f"job {j.job_id} holds {j.placement.num_gpus} GPUs, asked {j.spec.num_gpus}"
            )
        for node, g in j.placement.slots():
            n = by_name[node]
            if g >= n.num_gpus:
                raise InvariantViolation(f"job {j.job_id} on missing GPU {node}:{g}")
            if j.spec.gpu_type and n.gpu_type != j.spec.gpu_type:
                raise InvariantViolation(f"job {j.job_id} on wrong GPU type {n.gpu_type}")


class CheckingBackend(ClusterBackend):
    def __init__(
        self, inner: ClusterBackend, max_jobs_per_gpu: int = 1, exact_gangs: bool = True
    ) -> None:
        self.inner = inner
        self.max_jobs_per_gpu = max_jobs_per_gpu
        self.exact_gangs = exact_gangs
        self.failed_actions: list[ActionResult] = []

    def snapshot(self) -> ClusterSnapshot:
        return self.inner.snapshot()

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        results = self.inner.apply(actions)
        self.failed_actions.extend(r for r in results if not r.ok)
        check_snapshot(self.inner.snapshot(), self.max_jobs_per_gpu, self.exact_gangs)
        return results

    def finished(self) -> bool:
        return self.inner.finished()

    def completed(self) -> list[CompletedJob]:
        return self.inner.completed()
