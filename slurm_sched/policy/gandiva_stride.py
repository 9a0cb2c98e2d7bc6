"""Gang-aware stride scheduling (Gandiva_fair, slides "Split-Stride Scheduler"): the pure core.

Every client (a job, or a server's aggregate in the central layer) has a ``pass``; each quantum
the clients are taken in ascending order of the sort key and run if they fit, and a client that
runs pays ``size / tickets`` (the slides' increment; with size 1 it is the classic stride
scheduler's ``1 / tickets``). A client that does not fit is skipped and later, smaller ones may
still run (the slides' loop lacks the ``i += 1`` of the skip branch; it is added here).

Tie-break (the slides say nothing; spec DESIGN): ``(pass, last run quantum [never = -1],
arrival sequence)``: among equal passes the least recently run client goes first, among clients
never run the earliest arrival. This reproduces both slide tables exactly. Passes are floats
compared after rounding to :data:`PASS_DIGITS` decimals, so 0.1 + 0.2 ties with 0.3.

Two fit rules:
- :func:`gang_stride_round`: the slides' rule, a client fits when ``size <= free GPUs``;
- :func:`slot_stride_round`: each client holds fixed GPUs (a Slurm job keeps its GPUs while
  suspended) and fits when none of them is taken yet this quantum. With the slots laid out as
  ``A:0, B:1, C:2-3, D:2-3, E:0-3`` it yields the slides' gang table too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

#: Decimals kept when comparing passes (a stable epsilon, as the spec allows).
PASS_DIGITS = 9

Slot = tuple[str, int]


@dataclass
class StrideClient:
    """One schedulable entity: ``size`` GPUs, ``tickets`` > 0, its ``pass`` and history."""

    key: str
    size: int
    tickets: float
    pass_: float = 0.0
    last_run: int = -1
    seq: int = 0
    slots: frozenset[Slot] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"client {self.key}: size must be >= 1, got {self.size}")
        if not self.tickets > 0:
            raise ValueError(f"client {self.key}: tickets must be > 0, got {self.tickets}")

    @property
    def stride(self) -> float:
        """Pass increment of one quantum on all of its GPUs."""
        return self.size / self.tickets

    def charge(self, quantum: int, fraction: float = 1.0) -> None:
        """Account one run (``fraction`` of a quantum) in quantum number ``quantum``."""
        self.pass_ += self.stride * fraction
        self.last_run = quantum


def sort_key(c: StrideClient) -> tuple[float, int, int]:
    return (round(c.pass_, PASS_DIGITS), c.last_run, c.seq)


def gang_stride_round(
    clients: Iterable[StrideClient], quantum: int, num_gpus: int
) -> list[StrideClient]:
    """One quantum of the slides' gang-aware stride on ``num_gpus`` interchangeable GPUs."""
    free = num_gpus
    chosen: list[StrideClient] = []
    for c in sorted(clients, key=sort_key):
        if free <= 0:
            break
        if c.size <= free:
            chosen.append(c)
            free -= c.size
            c.charge(quantum)
    return chosen


def slot_stride_round(
    clients: Iterable[StrideClient],
    quantum: int,
    claimed: set[Slot] | None = None,
    fraction: float = 1.0,
) -> list[StrideClient]:
    """One quantum of gang-aware stride where each client needs its own fixed ``slots``.

    ``claimed`` (updated in place) holds GPUs already taken this quantum (by the central layer
    or by jobs that keep running); ``fraction`` of a quantum is charged (a mid-quantum fill).
    """
    taken = claimed if claimed is not None else set()
    chosen: list[StrideClient] = []
    for c in sorted(clients, key=sort_key):
        if taken.isdisjoint(c.slots):
            chosen.append(c)
            taken.update(c.slots)
            c.charge(quantum, fraction)
    return chosen


def weighted_mean_pass(clients: Iterable[StrideClient]) -> float | None:
    """Ticket-weighted mean pass (a scheduler's virtual time: it advances by GPUs used / total
    tickets per quantum); None without clients."""
    num = den = 0.0
    for c in clients:
        num += c.tickets * c.pass_
        den += c.tickets
    return num / den if den > 0 else None


class GangStride:
    """A single-server gang-aware stride scheduler (the slides' algorithm, stateful).

    ``add`` joins a client at the scheduler's virtual time (ticket-weighted mean pass of the
    present clients, 0 when empty), so a newcomer neither monopolises the server nor starts
    behind; ``set_tickets`` keeps the pass and changes future increments (spec DESIGN).
    """

    def __init__(self, num_gpus: int) -> None:
        if num_gpus < 1:
            raise ValueError(f"num_gpus must be >= 1, got {num_gpus}")
        self.num_gpus = num_gpus
        self.clients: dict[str, StrideClient] = {}
        self.quantum = 0
        self._seq = 0

    def add(self, key: str, size: int, tickets: float) -> StrideClient:
        if key in self.clients:
            raise ValueError(f"client {key!r} added twice")
        if size > self.num_gpus:
            raise ValueError(f"client {key!r}: size {size} > {self.num_gpus} GPUs")
        vt = weighted_mean_pass(self.clients.values())
        c = StrideClient(key, size, tickets, pass_=vt or 0.0, seq=self._seq)
        self._seq += 1
        self.clients[key] = c
        return c

    def remove(self, key: str) -> None:
        del self.clients[key]

    def set_tickets(self, key: str, tickets: float) -> None:
        if not tickets > 0:
            raise ValueError(f"client {key!r}: tickets must be > 0, got {tickets}")
        self.clients[key].tickets = tickets

    def schedule(self) -> list[str]:
        """Run one quantum; return the keys scheduled, in selection order."""
        chosen = gang_stride_round(self.clients.values(), self.quantum, self.num_gpus)
        self.quantum += 1
        return [c.key for c in chosen]
