"""The control loop: snapshot -> decide -> apply -> record, the same code in simulation and
production. Only the :class:`~slurm_sched.clock.Clock` and the backend differ.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from slurm_sched.backend import ClusterBackend
from slurm_sched.clock import Clock
from slurm_sched.errors import SimulationStalledError
from slurm_sched.model import ActionResult
from slurm_sched.policy.base import Policy

log = logging.getLogger(__name__)

CycleHook = Callable[[float, list[ActionResult]], None]


@dataclass
class ControllerStats:
    cycles: int = 0
    actions_ok: int = 0
    actions_failed: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class Controller:
    """Drives a policy against a backend on a clock.

    Args:
        backend: where snapshots come from and actions go.
        policy: the decision function.
        clock: simulated or wall clock.
        on_cycle: optional hook called after every cycle with (time, results): the decision log,
            metrics and progress bars hang here.
    """

    def __init__(
        self,
        backend: ClusterBackend,
        policy: Policy,
        clock: Clock,
        on_cycle: CycleHook | None = None,
    ) -> None:
        self.backend = backend
        self.policy = policy
        self.clock = clock
        self.on_cycle = on_cycle
        self.stats = ControllerStats()

    def cycle(self, now_s: float) -> tuple[list[ActionResult], float | None]:
        """One scheduling cycle at ``now_s``; returns the results and the policy's next timer."""
        snap = self.backend.snapshot()
        actions = self.policy.decide(snap, now_s)
        results = self.backend.apply(actions) if actions else []
        if results:
            snap = self.backend.snapshot()
            for r in results:
                if r.ok:
                    self.stats.actions_ok += 1
                    self.stats.by_kind[r.action.kind] = self.stats.by_kind.get(r.action.kind, 0) + 1
                else:
                    self.stats.actions_failed += 1
                    log.warning(
                        "t=%.1f %s %s failed: %s", now_s, r.action.kind, r.action.job_id, r.error
                    )
        self.stats.cycles += 1
        if self.on_cycle is not None:
            self.on_cycle(now_s, results)
        return results, self.policy.next_wakeup_s(snap, now_s)

    def run(self, until_s: float | None = None) -> ControllerStats:
        """Cycle until the backend is finished, the clock stops, or ``until_s`` passes.

        Raises:
            SimulationStalledError: the clock has nothing left to wait for while jobs remain
                (a policy that never starts a job that could run).
        """
        now = self.clock.now()
        while not self.backend.finished():
            if until_s is not None and now > until_s:
                break
            _, wake = self.cycle(now)
            nxt = self.clock.wait(wake)
            if nxt is None:
                if self.backend.finished() or self.clock.stopped:
                    break
                snap = self.backend.snapshot()
                stuck = [j.job_id for j in snap.jobs]
                if not stuck:
                    break
                reasons = {j: self.policy.explain(snap, j) for j in stuck[:5]}
                raise SimulationStalledError(now, stuck, reasons)
            now = nxt
        return self.stats
