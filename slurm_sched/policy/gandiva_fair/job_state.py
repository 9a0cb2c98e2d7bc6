"""What Gandiva_fair keeps of a job: across cycles (:class:`JobMemory`: its pass, due pass and
migration back-off) and within one cycle while it holds GPUs (:class:`HeldJob`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurm_sched.model import JobView
from slurm_sched.policy.gandiva_stride import Slot

EPS = 1e-9  # tolerance of the float comparisons (shares, GPUs, passes, times)


@dataclass
class JobMemory:
    """What the policy remembers about a job between cycles."""

    seq: int
    pass_: float | None = None
    #: The pass the job would have with exactly its fair share: it grows by (water-filled
    #: GPUs / tickets) per quantum, so ``due - pass`` is how far behind the job is.
    due: float = 0.0
    last_run: int = -1
    placed_at_s: float = 0.0
    #: Lag when last moved, and the back-off factor of its residence time: a move after which
    #: the job fell further behind did not help, so the next one waits twice as long.
    lag_at_move: float | None = None
    backoff: int = 1

    @property
    def lag(self) -> float:
        return self.due - (self.pass_ or 0.0)


@dataclass
class HeldJob:
    """A job holding GPUs (running or suspended), as this cycle sees it."""

    view: JobView
    user: str
    size: int
    pool: str
    slots: frozenset[Slot]
    servers: tuple[str, ...]
    running: bool
    tickets: float = 1.0
    share: float = 1.0  # time share: water-filled GPUs / size, in (0, 1]
    moved: bool = False
    #: ``view.job_id``, a plain attribute (read hundreds of thousands of times a cycle)
    job_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.job_id = self.view.spec.job_id

    @property
    def capped(self) -> bool:
        return self.share >= 1.0 - EPS
