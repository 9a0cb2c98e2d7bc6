"""A finished job's accounting record: what every backend reports and the metrics read."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from slurm_sched.model.job import JobSpec


class CompletedJob(BaseModel):
    """A finished job's accounting record (what the metrics are computed from)."""

    model_config = ConfigDict(frozen=True)

    spec: JobSpec
    first_start_s: float
    finish_s: float
    executed_s: float
    preemptions: int = 0

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.spec.submit_time_s

    @property
    def queue_s(self) -> float:
        """Time not spent running: waiting before the first start and after preemptions."""
        return max(0.0, self.jct_s - self.executed_s)
