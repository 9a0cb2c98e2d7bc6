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
- Every subclass's ``decide`` runs with Python's cyclic garbage collector paused
  (:func:`gc_paused`, applied by :meth:`Policy.__init_subclass__`). A cycle over a big
  snapshot (10,000 pending jobs) allocates some 10^5 short-lived objects, which reference
  counting frees; the collector's full passes they trigger walk every object of the process,
  the snapshot included, and cost 0.3-0.45 s per decide on a 2-core VM (about a third of Muri's
  and Gandiva_fair's time). The collector runs again, as it was, when ``decide`` returns.
"""

from __future__ import annotations

import abc
import functools
import gc
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from slurm_sched.model import Action, ClusterSnapshot

_F = TypeVar("_F", bound=Callable[..., Any])


def gc_paused(fn: _F) -> _F:
    """``fn`` with the cyclic garbage collector off while it runs (restored as it was; nested
    calls leave it to the outermost)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    run.__gc_paused__ = True  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]



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
    #: Constructor options of a base class that this class sets itself (a variant such as
    #: Muri-S fixing ``know_duration``): the registry does not offer them (``create`` refuses).
    fixed_options: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("decide")
        if own is not None and not getattr(own, "__gc_paused__", False):
            cls.decide = gc_paused(own)  # type: ignore[method-assign]

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
