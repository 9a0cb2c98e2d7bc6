"""A small typed event heap with deterministic tie-breaking.

Events at the same time are popped by kind priority (completions, then arrivals), then in
insertion order: the heap key is ``(time_s, priority, seq)`` so no two keys compare
equal and the job ids never take part in the ordering.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from enum import IntEnum


class EventKind(IntEnum):
    """Kinds in the order they are handled at equal times."""

    COMPLETION = 0
    ARRIVAL = 1


@dataclass(frozen=True, slots=True)
class Event:
    time_s: float
    kind: EventKind
    job_id: str = ""
    version: int = 0  # completion events older than the job's current version are stale


class EventQueue:
    """Min-heap of events keyed by (time, kind, insertion sequence)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = itertools.count()

    def push(self, event: Event) -> None:
        heapq.heappush(self._heap, (event.time_s, int(event.kind), next(self._seq), event))

    def peek_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def peek(self) -> Event | None:
        """The next event, left in the queue (``None`` when empty)."""
        return self._heap[0][3] if self._heap else None

    def pop(self) -> Event:
        return heapq.heappop(self._heap)[3]

    def __len__(self) -> int:
        return len(self._heap)
