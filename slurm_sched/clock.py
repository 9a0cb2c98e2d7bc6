"""Clocks: the one place that knows whether time is simulated or real.

The :class:`~slurm_sched.controller.Controller` asks ``wait(wake_at_s)`` for the time of its next
cycle. :class:`WallClock` sleeps until the timer or the next fixed period, whichever comes first
(a Slurm event source may wake it earlier). The simulator's clock,
:class:`slurm_sched.sim.clock.SimulatedClock`, jumps from event to event instead.
"""

from __future__ import annotations

import abc
import threading
import time


class Clock(abc.ABC):
    @abc.abstractmethod
    def now(self) -> float:
        """Current time in seconds."""

    @abc.abstractmethod
    def wait(self, wake_at_s: float | None) -> float | None:
        """Block until the next cycle is due; return its time, or None if nothing can happen."""

    @property
    def stopped(self) -> bool:
        """True once stopped on purpose (shutdown): a None from wait() is then no stall."""
        return False


class WallClock(Clock):
    """Real time: cycles every ``period_s`` at most, earlier if the policy's timer is due.

    ``poke()`` (from a signal handler or a Slurm event watcher) ends the current wait at once;
    ``stop()`` makes every later ``wait`` return None.
    """

    def __init__(self, period_s: float = 5.0) -> None:
        if period_s <= 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self.period_s = period_s
        self._wake = threading.Event()
        self._stopped = False

    def now(self) -> float:
        return time.time()

    def poke(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def wait(self, wake_at_s: float | None) -> float | None:
        if self._stopped:
            return None
        now = self.now()
        until = now + self.period_s
        if wake_at_s is not None:
            until = min(until, max(now, wake_at_s))
        self._wake.wait(timeout=max(0.0, until - now))
        self._wake.clear()
        return None if self._stopped else self.now()
