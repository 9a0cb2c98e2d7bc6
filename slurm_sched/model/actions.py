"""Actions: the only way a policy changes the cluster.

A pydantic discriminated union on ``kind``. Every action names one job; ``reason`` is a short
human-readable why, written to the decision log. ``request_id`` makes ``apply()`` idempotent:
a backend that has already applied a request id returns the earlier result and does nothing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from slurm_sched.model.placement import Placement
from slurm_sched.model.settings import JobSettings


class _ActionBase(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: str = Field(min_length=1)
    reason: str = ""
    request_id: str | None = None


class Start(_ActionBase):
    """Start (or restart after a preemption) a pending job exclusively on ``placement``."""

    kind: Literal["start"] = "start"
    placement: Placement
    settings: JobSettings = JobSettings()


class Share(_ActionBase):
    """Start a pending job on GPUs already used by ``with_jobs`` (co-location)."""

    kind: Literal["share"] = "share"
    placement: Placement
    with_jobs: tuple[str, ...] = ()
    settings: JobSettings = JobSettings()


class Suspend(_ActionBase):
    """Pause a running job in place; it keeps its GPUs and memory (Slurm semantics)."""

    kind: Literal["suspend"] = "suspend"


class Resume(_ActionBase):
    """Continue a suspended job where it was."""

    kind: Literal["resume"] = "resume"


class Preempt(_ActionBase):
    """Checkpoint a running or suspended job, free its GPUs and put it back in the queue."""

    kind: Literal["preempt"] = "preempt"


class Migrate(_ActionBase):
    """Move a running job to another placement (checkpoint, restart there)."""

    kind: Literal["migrate"] = "migrate"
    placement: Placement


class Reconfigure(_ActionBase):
    """Restart a running job with a new placement and settings (execution plan, resources)."""

    kind: Literal["reconfigure"] = "reconfigure"
    placement: Placement
    settings: JobSettings = JobSettings()


Action = Annotated[
    Start | Share | Suspend | Resume | Preempt | Migrate | Reconfigure,
    Field(discriminator="kind"),
]
ACTION_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)

#: Action kinds that place a job on GPUs.
PLACING_KINDS = frozenset({"start", "share", "migrate", "reconfigure"})


class ActionResult(BaseModel):
    """Outcome of one action. Failures are data: ``ok=False`` with an ``error`` message."""

    model_config = ConfigDict(frozen=True)

    action: Action
    ok: bool
    error: str | None = None
