"""The policy API: one pure decision function shared by the simulator and the Slurm service.

Contract:
- ``decide(snapshot, now_s)`` is called by the :class:`~slurm_sched.controller.Controller` once
  per scheduling cycle with a frozen snapshot. It returns the actions to apply, in order
  (preemptions before the starts that need their GPUs). It performs no I/O, reads no wall clock
  and never mutates the snapshot. A policy may keep *learned* state between calls (a fitted model,
  the time a job entered a queue), but the same snapshot and state give the same actions.
- "This job cannot be placed now" is not an exception: the job simply gets no action, and
  ``explain`` can say why.
- ``next_wakeup_s(snapshot, now_s)`` is the policy's own timer: the next time it wants a cycle
  even if no job arrives or finishes (Tiresias queue demotions, time slices). None = no timer.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from slurm_sched.model import Action, ClusterSnapshot


class Policy(abc.ABC):
    """Base class of every scheduling policy. Subclasses set ``name``, ``paper`` and ``summary``."""

    name: ClassVar[str]
    paper: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    #: True if the policy reads ``JobSpec.duration_s`` (an oracle).
    clairvoyant: ClassVar[bool] = False
    #: True if the policy co-locates jobs on a GPU (Share); exclusive policies never do.
    shares_gpus: ClassVar[bool] = False
    #: True if the policy may run a job on another GPU count than it asked for (via Reconfigure).
    elastic: ClassVar[bool] = False
    #: At most this many jobs on one GPU (the backend's sharing capacity C when this policy runs).
    max_jobs_per_gpu: ClassVar[int] = 1
    #: Name of the progress model (``slurm_sched.perf.registry``) of the world the policy was
    #: evaluated in; the simulator uses it unless told otherwise. None = identity.
    progress_model: ClassVar[str | None] = None

    @abc.abstractmethod
    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        """Actions for this cycle (may be empty)."""

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        """Absolute time of the next cycle the policy asks for, or None."""
        return None

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        """Why a job is where it is (pending, running...). Used by ``slurm-sched explain``."""
        job = snapshot.by_id.get(job_id)
        if job is None:
            return f"job {job_id} is not active"
        if job.state.value != "pending":
            return f"job {job_id} is {job.state.value} on {job.placement}"
        free = snapshot.num_free_gpus
        return (
            f"job {job_id} waits: it needs {job.spec.num_gpus} GPU(s); {free} free now, "
            f"and {self.name} has not chosen it"
        )
