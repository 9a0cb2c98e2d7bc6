"""Jobs: the canonical job spec every trace reader and the Slurm hint parser produce, and the
runtime view of a job inside a snapshot.

Units are in the field names. ``duration_s`` is the job's isolated run time on its requested GPUs
of the reference type: only clairvoyant policies (SJF, SRTF, Muri-S, ...) may read it; the others
must use attained service and their own predictions.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from slurm_sched.model.placement import Placement
from slurm_sched.model.settings import JobSettings


class JobSpec(BaseModel):
    """What a user asked for. Immutable for the whole life of the job."""

    model_config = ConfigDict(frozen=True)

    job_id: str = Field(min_length=1)
    submit_time_s: float = Field(ge=0)
    num_gpus: int = Field(ge=1)
    duration_s: float = Field(gt=0, description="isolated run time on the requested GPUs")
    user: str = Field(default="default", min_length=1, description="tenant / account")
    model: str | None = None
    batch_size: int | None = Field(default=None, ge=1, description="global batch size")
    iterations: int | None = Field(default=None, ge=1)
    gpu_type: str | None = Field(default=None, description="required GPU type, None = any")
    num_cpus: int | None = Field(default=None, ge=1)
    time_limit_s: float | None = Field(
        default=None, gt=0, description="the user's wall-clock limit (Slurm --time), s"
    )
    stage_times_ms: tuple[float, ...] | None = Field(
        default=None, description="per-iteration time per resource stage (Muri), ms"
    )
    attrs: dict[str, Any] = Field(default_factory=dict, description="format-specific extras")

    @property
    def iteration_time_s(self) -> float | None:
        if self.iterations:
            return self.duration_s / self.iterations
        return None

    @property
    def gpu_time_s(self) -> float:
        return self.duration_s * self.num_gpus


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"


class JobView(BaseModel):
    """A job as a snapshot sees it. Progress is accounted lazily.

    ``work_done_s`` and ``executed_s`` are exact as of ``accounted_at_s``; while the job runs they
    grow at ``rate`` (isolated seconds of work per wall second) and 1 respectively, except that no
    work is done before ``stall_until_s`` (restart overhead). Use the ``*_at(now)`` methods.
    """

    model_config = ConfigDict(frozen=True)

    spec: JobSpec
    state: JobState = JobState.PENDING
    placement: Placement | None = None
    settings: JobSettings = JobSettings()
    first_start_s: float | None = None
    accounted_at_s: float = 0.0
    executed_s: float = 0.0
    work_done_s: float = 0.0
    rate: float = 0.0
    stall_until_s: float = 0.0
    preemptions: int = 0

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def num_gpus(self) -> int:
        """GPUs held now (placement) or requested (pending)."""
        return self.placement.num_gpus if self.placement is not None else self.spec.num_gpus

    def executed_at(self, now_s: float) -> float:
        """Wall seconds spent RUNNING up to ``now_s``."""
        if self.state is JobState.RUNNING:
            return self.executed_s + max(0.0, now_s - self.accounted_at_s)
        return self.executed_s

    def attained_gpu_s(self, now_s: float) -> float:
        """Attained service in GPU-seconds (Tiresias 2D-LAS): executed time x requested GPUs."""
        return self.executed_at(now_s) * self.spec.num_gpus

    def work_done_at(self, now_s: float) -> float:
        """Isolated-seconds of work done up to ``now_s``."""
        if self.state is JobState.RUNNING and self.rate > 0:
            begin = max(self.accounted_at_s, self.stall_until_s)
            return min(self.spec.duration_s, self.work_done_s + self.rate * max(0.0, now_s - begin))
        return self.work_done_s

    def remaining_s(self, now_s: float) -> float:
        """Isolated seconds of work left (oracle: uses the true duration)."""
        return max(0.0, self.spec.duration_s - self.work_done_at(now_s))
