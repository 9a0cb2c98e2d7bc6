"""Gandiva_fair's admission caches: per-server indexes of GPU sets by load (:class:`PickIndex`
for jobs that fit a server, :class:`WideIndex` for wider ones) and the sums admission keeps up
to date as it places jobs (:class:`AdmitCache`).
"""

from __future__ import annotations

import abc
import math
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field
from typing import Any

from slurm_sched.model import Node, Placement
from slurm_sched.policy.gandiva_stride import Slot


class ServerIndex(abc.ABC):
    """Entries per server of one list of servers, kept in one sorted list during admission;
    a server whose loads changed (:meth:`touch`) is re-filed at the next query."""

    def __init__(self, nodes: list[Node], cap: int, admit: AdmitCache) -> None:
        self.cap = cap
        self.admit = admit
        self.pos = {n.name: i for i, n in enumerate(nodes)}
        self.nodes = {n.name: n for n in nodes}
        self.sorted: list[tuple[Any, ...]] = []
        self.by_node: dict[str, list[tuple[Any, ...]]] = {}
        #: servers whose loads changed since they were filed (re-filed at the next query)
        self.dirty: set[str] = set()
        for n in nodes:
            out = self.by_node[n.name] = self._entries(n)
            self.sorted.extend(out)
            admit.watchers.setdefault(n.name, []).append(self)
        self.sorted.sort()

    @abc.abstractmethod
    def _entries(self, n: Node) -> list[tuple[Any, ...]]:
        """The sorted-list entries of server ``n`` as it is now."""

    def _avail(self, n: Node) -> list[tuple[float, int, int]]:
        """(load, jobs, GPU index) of the server's GPUs under the capacity, by index (shared
        by the indexes of one capacity until the server's loads change; read-only)."""
        admit, cap = self.admit, self.cap
        out = admit.avail.get((n.name, cap))
        if out is None:
            load, count = admit.load, admit.count
            out = []
            for g in range(n.num_gpus):
                slot = (n.name, g)
                c = count.get(slot, 0)
                if c < cap:
                    out.append((load.get(slot, 0), c, g))
            admit.avail[(n.name, cap)] = out
        return out

    def touch(self, node: str) -> None:
        self.dirty.add(node)

    def _refresh(self) -> None:
        entries = self.sorted
        for node in self.dirty:
            old = self.by_node[node]
            out = self.by_node[node] = self._entries(self.nodes[node])
            # entries are unique: replace only those that changed (a placement changes one
            # aligned block of a server, not the others)
            for e in old:
                if e not in out:
                    del entries[bisect_left(entries, e)]
            for e in out:
                if e not in old:
                    insort(entries, e)
        self.dirty.clear()


class PickIndex(ServerIndex):
    """The single-server GPU sets of one size on a list of servers, sorted by their score
    without the job's share: (max load, rounded sum of loads, jobs, server position, set).

    :func:`.placement.choose_gpus` ranks sets by ``(round(max load + share, 9), round(sum
    of loads, 9), jobs, position)``; adding the share and rounding keeps the order of the max
    loads except between loads less than 3e-9 apart, so only the best set of each distinct
    max load within 3e-9 of the lowest is scored exactly."""

    WINDOW = 3e-9

    def __init__(self, nodes: list[Node], size: int, cap: int, admit: AdmitCache) -> None:
        self.size = size
        super().__init__(nodes, cap, admit)

    def _entries(self, n: Node) -> list[tuple[Any, ...]]:
        size = self.size
        if n.num_gpus < size:
            return []
        avail = self._avail(n)
        if len(avail) < size:
            return []
        name, pos, num = n.name, self.pos[n.name], n.num_gpus
        if size == 1:  # _slot_sets: the least loaded GPU
            a = min(avail)
            return [(a[0], round(a[0], 9), a[1], pos, 0, name, (a[2],))]
        if size < num and size & (size - 1) == 0 and num & (num - 1) == 0:
            # _slot_sets' aligned blocks, inlined (thousands of servers re-filed a cycle)
            by_index = {a[2]: a for a in avail}
            out: list[tuple[Any, ...]] = []
            for start in range(0, num, size):
                block = [by_index[g] for g in range(start, start + size) if g in by_index]
                if len(block) < size:
                    continue
                loads = [b[0] for b in block]
                out.append((max(loads), round(sum(loads), 9), sum(b[1] for b in block),
                            pos, len(out), name, tuple(range(start, start + size))))
            if out:
                return out
        pick = sorted(avail)[:size]  # _slot_sets: the least loaded GPUs
        return [(max(a[0] for a in pick), round(sum(a[0] for a in pick), 9),
                 sum(a[1] for a in pick), pos, 0, name, tuple(sorted(a[2] for a in pick)))]

    def best(self, share: float) -> tuple[str, tuple[int, ...]] | None:
        self._refresh()
        entries = self.sorted
        if not entries:
            return None
        low = entries[0][0]
        best: tuple[Any, ...] | None = None
        i = 0
        while i < len(entries):
            e = entries[i]
            if e[0] > low + self.WINDOW:
                break
            key = (round(e[0] + share, 9), e[1], e[2], e[3], e[4])
            if best is None or key < best[0]:
                best = (key, e)
            i = bisect_right(entries, (e[0], math.inf))
        assert best is not None
        return best[1][5], best[1][6]


class WideIndex(ServerIndex):
    """The servers of a list, ranked as :func:`.placement.choose_gpus` ranks them for a job
    wider than any of them: (not all GPUs available, rounded mean load of the available ones,
    position), with each server's available GPUs by (load, jobs, index)."""

    def __init__(self, nodes: list[Node], cap: int, admit: AdmitCache) -> None:
        self.avail: dict[str, list[tuple[float, int, int]]] = {}
        super().__init__(nodes, cap, admit)

    def _entries(self, n: Node) -> list[tuple[Any, ...]]:
        avail = sorted(self._avail(n))
        self.avail[n.name] = avail
        if not avail:
            return []
        mean = sum(a[0] for a in avail) / len(avail)
        return [(-(len(avail) == n.num_gpus), round(mean, 9), self.pos[n.name], n.name)]

    def take(self, size: int) -> Placement | None:
        """The GPUs of the best ranked servers, ``size`` in all, or None."""
        self._refresh()
        alloc: dict[str, list[int]] = {}
        left = size
        for e in self.sorted:
            take = self.avail[e[3]][:left]
            alloc[e[3]] = sorted(a[2] for a in take)
            left -= len(take)
            if left == 0:
                return Placement.of(alloc)
        return None


@dataclass
class AdmitCache:
    """What admission asks for once per job, kept up to date as it places jobs: each GPU's
    load and job count, jobs per (user, pool), and per pool the running sums of
    :func:`.placement.join_pass` (uncapped jobs, then all) in ``held`` order. The plain
    sums scan every holder or held job for each of thousands of pending jobs; these are the
    same sums, accumulated in the same order."""

    load: dict[Slot, float]
    count: dict[Slot, int]
    per_user_pool: dict[tuple[str, str], int]
    #: GPUs held per pool and per (user, pool)
    pool_gpus: dict[str, int]
    user_pool_gpus: dict[tuple[str, str], int]
    #: pool -> [tickets, tickets x pass, jobs] of uncapped jobs, then of all jobs with a pass
    passes: dict[str, list[float]]
    #: servers of a (pool, required type) and their GPU-set indexes by size
    servers: dict[tuple[str, str | None], list[Node]] = field(default_factory=dict)
    picks: dict[tuple[str, str | None, int], PickIndex] = field(default_factory=dict)
    wide: dict[tuple[str, str | None], WideIndex] = field(default_factory=dict)
    #: server -> the indexes that hold it (re-filed when its loads change)
    watchers: dict[str, list[ServerIndex]] = field(default_factory=dict)
    placements: dict[tuple[str, tuple[int, ...]], Placement] = field(default_factory=dict)
    #: (server, capacity) -> its GPUs under the capacity (``ServerIndex._avail``)
    avail: dict[tuple[str, int], list[tuple[float, int, int]]] = field(default_factory=dict)
    widest: dict[tuple[str, str | None], int] = field(default_factory=dict)
