"""The simulated clock: virtual time that jumps to the next event of a :class:`SimulatedBackend`.

``wait(wake_at_s)`` advances to the next event (arrival, completion) or to the policy's timer,
whichever comes first, handling the events on the way.
"""

from __future__ import annotations

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
        return t
