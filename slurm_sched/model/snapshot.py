"""The frozen state a policy decides on.

A snapshot is taken at the beginning of a scheduling cycle and never changes; everything derived
from it (free GPUs, GPU occupancy) is computed once on first use.
"""

from __future__ import annotations

from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field

from slurm_sched.model.cluster import Cluster
from slurm_sched.model.job import JobState, JobView

GpuSlot = tuple[str, int]


class ClusterSnapshot(BaseModel):
    """Cluster plus every unfinished job (pending, running, suspended) at ``now_s``.

    ``jobs`` is in submission order (ties by job id). Completed jobs are not included.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    now_s: float
    cluster: Cluster
    jobs: tuple[JobView, ...]
    #: Free GPUs per node as the backend already knows them (saves recomputing them from jobs).
    known_free_gpus: dict[str, tuple[int, ...]] | None = Field(default=None, repr=False)
    #: The pending jobs (in ``jobs`` order) as the backend already knows them.
    known_pending: tuple[JobView, ...] | None = Field(default=None, repr=False)

    @cached_property
    def by_id(self) -> dict[str, JobView]:
        return {j.job_id: j for j in self.jobs}

    def job(self, job_id: str) -> JobView:
        return self.by_id[job_id]

    @cached_property
    def pending(self) -> tuple[JobView, ...]:
        if self.known_pending is not None:
            return self.known_pending
        return tuple(j for j in self.jobs if j.state is JobState.PENDING)

    @cached_property
    def running(self) -> tuple[JobView, ...]:
        return tuple(j for j in self.jobs if j.state is JobState.RUNNING)

    @cached_property
    def suspended(self) -> tuple[JobView, ...]:
        return tuple(j for j in self.jobs if j.state is JobState.SUSPENDED)

    @cached_property
    def occupancy(self) -> dict[GpuSlot, tuple[str, ...]]:
        """Jobs holding each GPU (running or suspended); GPUs held by nobody are absent."""
        occ: dict[GpuSlot, list[str]] = {}
        for j in self.jobs:
            if j.placement is not None and j.state is not JobState.PENDING:
                for slot in j.placement.slots():
                    occ.setdefault(slot, []).append(j.job_id)
        return {k: tuple(v) for k, v in occ.items()}

    @cached_property
    def free_gpus(self) -> dict[str, tuple[int, ...]]:
        """Unused GPU indices per node, for every node (possibly empty), in cluster order."""
        if self.known_free_gpus is not None:
            return self.known_free_gpus
        occ = self.occupancy
        return {
            n.name: tuple(g for g in range(n.num_gpus) if (n.name, g) not in occ)
            for n in self.cluster.nodes
        }

    @cached_property
    def num_free_gpus(self) -> int:
        return sum(len(v) for v in self.free_gpus.values())
