"""The simulated clock: virtual time that jumps to the next event of a :class:`SimulatedBackend`.

``wait(wake_at_s)`` advances to the next event (arrival, completion) or to the policy's timer,
whichever comes first, handling the events on the way, and tells the backend where it stopped
(:meth:`SimulatedBackend.scheduling_point`: the per-event overhead of artifact profiles).
"""

from __future__ import annotations

import math

from slurm_sched.clock import Clock
from slurm_sched.sim.backend import SimulatedBackend


class SimulatedClock(Clock):
    """Event-driven virtual time over a :class:`SimulatedBackend`'s event queue."""

    def __init__(self, backend: SimulatedBackend) -> None:
        self.backend = backend

    def now(self) -> float:
        return self.backend.now_s

    def wait(self, wake_at_s: float | None) -> float | None:
        nxt = self.backend.next_event_s()
        if wake_at_s is not None and wake_at_s <= self.backend.now_s:
            wake_at_s = None  # a timer in the past is no timer (guards against busy loops)
        if nxt is None and wake_at_s is None:
            return None
        if wake_at_s is None:
            t = nxt
        elif nxt is None:
            t = wake_at_s
        else:
            t = min(nxt, wake_at_s)
        assert t is not None  # both None returned above
        self.backend.advance_to(t)
        self.backend.scheduling_point(timer=t == wake_at_s)
        return t


class RoundClock(SimulatedClock):
    """Virtual time in fixed rounds: the scheduler acts only at multiples of ``round_s``.

    Events between two rounds are handled when they happen (a job completes mid-round and its
    GPUs stay idle), but the next cycle runs at the first round boundary at or after the next
    event or timer, as in simulators that schedule every ``round_s`` seconds.
    """

    def __init__(self, backend: SimulatedBackend, round_s: float) -> None:
        if round_s <= 0:
            raise ValueError(f"round_s must be > 0, got {round_s}")
        super().__init__(backend)
        self.round_s = round_s

    def wait(self, wake_at_s: float | None) -> float | None:
        nxt = self.backend.next_event_s()
        if wake_at_s is not None and wake_at_s <= self.backend.now_s:
            wake_at_s = None
        due = [t for t in (nxt, wake_at_s) if t is not None]
        if not due:
            return None
        # the first boundary at or after the earliest due time (an event due now is handled
        # now and the round re-run; the next call then sees only later events)
        first = min(due)
        t = math.ceil(first / self.round_s) * self.round_s
        if t < first:  # float rounding of the product; a t short of the event would loop
            t += self.round_s
        self.backend.advance_to(t)
        self.backend.scheduling_point(timer=True)  # every round is a scheduling event
        return t
