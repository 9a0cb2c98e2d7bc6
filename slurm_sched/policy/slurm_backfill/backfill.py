"""What sched/backfill needs to know of the running jobs: when each one ends at the latest, and
the reservation of a blocked job (https://slurm.schedmd.com/sched_config.html).

A running job is assumed to run until its start plus its time limit (Slurm kills it then); a
job past its limit (the simulator does not kill it) is taken to end now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurm_sched.model import Placement
from slurm_sched.policy.placement import FreeMap, pack_consolidated


@dataclass(frozen=True)
class Running:
    """A running job as the backfill planner sees it."""

    end_s: float  # start + time limit
    gpus: int
    account: str
    #: (node, GPU index, GPU type) of every GPU it holds
    slots: tuple[tuple[str, int, str], ...]


@dataclass(frozen=True)
class Reservation:
    """Where and when a blocked job starts at the latest if no higher-priority job comes."""

    job_id: str
    made_s: float
    start_s: float
    slots: frozenset[tuple[str, int]]


def slots_of(placement: Placement, gpu_type_of: Mapping[str, str]) -> tuple[
        tuple[str, int, str], ...]:
    """Every (node, GPU, GPU type) of a placement."""
    return tuple((n, g, gpu_type_of[n]) for n, g in placement.slots())


class Planner:
    """One backfill pass's view of the future: the free GPUs now and the running jobs by end.

    ``free`` is the pass's free map (read when a reservation is made, so it must be current);
    ``running`` the running jobs (the ones the pass starts included: add them with :meth:`add`).
    """

    def __init__(self, free: FreeMap, gpu_type_of: Mapping[str, str],
                 running: Sequence[Running], now_s: float, window_s: float) -> None:
        self.free = free
        self.gpu_type_of = gpu_type_of
        self.now_s = now_s
        self.horizon_s = now_s + window_s
        self._ends = sorted(running, key=lambda r: max(now_s, r.end_s))
        #: GPU type (None: any) -> the fewest GPUs found not to free up within the window
        self._beyond: dict[str | None, int] = {}

    def add(self, job: Running) -> None:
        """A job the pass starts: it holds its GPUs until its end."""
        self._ends.append(job)
        self._ends.sort(key=lambda r: max(self.now_s, r.end_s))

    def reserve(self, job_id: str, num_gpus: int, gpu_type: str | None) -> Reservation | None:
        """The earliest time the GPUs free now plus those of the running jobs ending by then
        hold ``num_gpus`` GPUs (of ``gpu_type``), and the GPUs the job takes then (consolidated
        packing, as the main scheduler places it). None when that time is past the window
        (``bf_window``), or never comes (GPUs held by others).

        Consolidated packing places a job whenever enough GPUs of its type are free, so the
        time is the first at which the count suffices."""
        beyond = self._beyond.get(gpu_type)
        if beyond is not None and num_gpus >= beyond:
            return None  # a smaller job of the type found no room within the window
        types = self.gpu_type_of

        def counts(n: str) -> bool:
            return gpu_type is None or types[n] == gpu_type

        have = sum(len(g) for n, g in self.free.items() if counts(n))
        at: float | None = None
        used = 0
        ends = self._ends
        for i, r in enumerate(ends):
            end = max(self.now_s, r.end_s)
            if end > self.horizon_s:
                break
            have += sum(1 for s in r.slots if gpu_type is None or s[2] == gpu_type)
            if have >= num_gpus:
                at = end
                used = i + 1
                # every job ending at the same moment frees its GPUs too
                while used < len(ends) and max(self.now_s, ends[used].end_s) <= end:
                    used += 1
                break
        if at is None:
            self._beyond[gpu_type] = min(num_gpus, beyond if beyond is not None else num_gpus)
            return None
        future: FreeMap = {n: list(g) for n, g in self.free.items() if counts(n)}
        for r in ends[:used]:
            for n, g, t in r.slots:
                if gpu_type is None or t == gpu_type:
                    future[n].append(g)
        for gs in future.values():
            gs.sort()
        placement = pack_consolidated(future, num_gpus)
        if placement is None:  # the count suffices, so packing succeeds; guard all the same
            return None
        return Reservation(job_id, self.now_s, at, frozenset(placement.slots()))
