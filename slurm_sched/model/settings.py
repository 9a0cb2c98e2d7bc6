"""What the job runtime must apply for a placement: the policy-specific knobs carried by actions."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class JobSettings(BaseModel):
    """Runtime settings a policy chose for a job; defaults mean "as submitted".

    - ``accumulation_steps`` / ``sub_batch_size``: gradient accumulation (SJF-BSBF): the job runs
      ``accumulation_steps`` sub-batches of ``sub_batch_size`` per GPU per optimizer step.
    - ``plan``: execution plan code (Rubick), e.g. ``dp``, ``zero-dp``, ``zero-offload``, ``gc``,
      or a PP-TP-DP triple such as ``2-2-1``.
    - ``group_id`` / ``slot``: interleaving group and this member's turn (Muri).
    - ``cpus`` / ``mem_gb``: host resources allocated with the GPUs (Rubick), None = default.
    """

    model_config = ConfigDict(frozen=True)

    accumulation_steps: int = Field(default=1, ge=1)
    sub_batch_size: int | None = Field(default=None, ge=1)
    plan: str | None = None
    group_id: str | None = None
    slot: int | None = Field(default=None, ge=0)
    cpus: int | None = Field(default=None, ge=1)
    mem_gb: float | None = Field(default=None, gt=0)


#: "As submitted": every default (frozen, so one object serves every job and action).
AS_SUBMITTED = JobSettings()
