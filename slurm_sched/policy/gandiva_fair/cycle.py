"""The working state of one Gandiva_fair ``decide()`` call (:class:`Cycle`): held jobs and GPU
holders, entitlements, water levels and the actions decided so far.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from slurm_sched.model import Action, ClusterSnapshot
from slurm_sched.policy.gandiva_fair.admission import AdmitCache
from slurm_sched.policy.gandiva_fair.job_state import HeldJob
from slurm_sched.policy.gandiva_stride import Slot


@dataclass
class Cycle:
    """Working state of one decide() call."""

    snap: ClusterSnapshot
    now: float
    #: GPUs per pool (:func:`.tickets.pool_sizes`), read-only
    pools: dict[str, int] = field(default_factory=dict)
    held: dict[str, HeldJob] = field(default_factory=dict)
    holders: dict[Slot, list[str]] = field(default_factory=lambda: defaultdict(list))
    entitlement: dict[str, dict[str, float]] = field(default_factory=dict)
    user_tickets: dict[str, float] = field(default_factory=dict)
    lam: dict[str, float] = field(default_factory=dict)  # water level per pool
    pre: list[Action] = field(default_factory=list)  # moves and placements, in order
    newly_running: set[str] = field(default_factory=set)
    admit: AdmitCache | None = None  # only while _admit runs
    #: Bumped when a held job is added or changes pool (the inputs of ``_shares``), and the
    #: version ``_shares`` last ran at: with nothing changed it would compute the same shares.
    version: int = 0
    shares_at: int = -1

    def load(self, slot: Slot, exclude: str | None = None) -> float:
        if exclude is None and self.admit is not None:
            return self.admit.load.get(slot, 0)
        return sum(self.held[j].share for j in self.holders.get(slot, ()) if j != exclude)

    def count(self, slot: Slot, exclude: str | None = None) -> int:
        if exclude is None and self.admit is not None:
            return self.admit.count.get(slot, 0)
        return sum(1 for j in self.holders.get(slot, ()) if j != exclude)
