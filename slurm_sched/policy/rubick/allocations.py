"""The tentative state of one Rubick pass: a job's allocation (:class:`Alloc`), which job holds
each GPU slot (:class:`SlotHolds`, for ordering actions), and the nodes' free resources with an
undo journal (:class:`NodeState`, :class:`State`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from slurm_sched.model import Placement
from slurm_sched.perf.rubick.shapes import Shape
from slurm_sched.policy.placement import CountIndex
from slurm_sched.policy.rubick.candidates import Cand


class Alloc:
    """A job's tentative allocation: GPU indices, CPUs and host memory per node.

    A value like :class:`Cand` (and written out for the same reason). Allocations key the
    per-pass caches of donor steps: hashed millions of times, so the hash is kept."""

    def __init__(self, gpus: tuple[tuple[str, tuple[int, ...]], ...],
                 cpus: tuple[tuple[str, int], ...], mem: tuple[tuple[str, float], ...],
                 cand: Cand, cpus_per_gpu: int) -> None:
        self.gpus = gpus
        self.cpus = cpus
        self.mem = mem
        self.cand = cand
        self.cpus_per_gpu = cpus_per_gpu
        self._hash = 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Alloc):
            return False
        return self is other or (
            self.gpus == other.gpus and self.cpus == other.cpus and self.mem == other.mem
            and self.cand == other.cand and self.cpus_per_gpu == other.cpus_per_gpu)

    def __hash__(self) -> int:
        h = self._hash
        if h == 0:
            h = self._hash = hash(
                (self.gpus, self.cpus, self.mem, self.cand, self.cpus_per_gpu)) or 1
        return h

    def __repr__(self) -> str:
        return (f"Alloc(gpus={self.gpus!r}, cpus={self.cpus!r}, mem={self.mem!r}, "
                f"cand={self.cand!r}, cpus_per_gpu={self.cpus_per_gpu!r})")

    @property
    def total(self) -> int:
        return sum(len(g) for _, g in self.gpus)

    def count(self, node: str) -> int:
        for n, g in self.gpus:
            if n == node:
                return len(g)
        return 0

    def counts(self) -> dict[str, int]:
        return {n: len(g) for n, g in self.gpus}

    def indices(self, node: str) -> tuple[int, ...]:
        for n, g in self.gpus:
            if n == node:
                return g
        return ()

    def shape(self) -> Shape:
        return tuple(sorted((len(g) for _, g in self.gpus), reverse=True))

    def placement(self) -> Placement:
        return Placement.of({n: list(g) for n, g in self.gpus})


class SlotHolds:
    """Which job holds each GPU slot, for ordering actions so that every placement's GPUs
    are free when it is applied (Rubick and its baselines)."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, int], str] = {}
        self.owned: dict[str, set[tuple[str, int]]] = {}  # job -> the slots ``held`` gives it

    def hold(self, slot: tuple[str, int], jid: str) -> None:
        prev = self.held.get(slot)
        if prev is not None:
            self.owned[prev].discard(slot)
        self.held[slot] = jid
        self.owned.setdefault(jid, set()).add(slot)

    def release(self, jid: str) -> None:
        for slot in self.owned.pop(jid, ()):
            del self.held[slot]

    def take(self, slots: list[tuple[str, int]], jid: str) -> bool:
        """Move ``jid`` to ``slots`` if none is held by another job; whether it moved."""
        if not all(self.held.get(s) in (None, jid) for s in slots):
            return False
        self.release(jid)
        for s in slots:
            self.hold(s, jid)
        return True


@dataclass(eq=False)  # a node's mutable state in one pass: equal only to itself
class NodeState:
    name: str
    gpus: int
    cpus: int
    mem_gb: float
    free_gpus: set[int]
    free_cpus: int
    free_mem: float
    jobs: set[str] = field(default_factory=set)


class State:
    """Tentative cluster state of one pass with an undo journal."""

    def __init__(self, nodes: list[NodeState]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.order = [n.name for n in nodes]
        self.pos = {n: i for i, n in enumerate(self.order)}
        self.alloc: dict[str, Alloc | None] = {}
        #: (job, its previous allocation, the versions of the nodes the change touched, the
        #: state's number before the change)
        self.journal: list[tuple[str, Alloc | None, list[tuple[str, int]], int]] = []
        #: free GPUs per node, indexed (best fit / most free without scanning every node);
        #: kept in step by :meth:`set`, the only writer of ``free_gpus``
        self.free_index = CountIndex({n.name: len(n.free_gpus) for n in nodes})
        #: a new number whenever a node's jobs or their allocations change (caches key on it);
        #: a rollback gives the nodes back their numbers (their allocations are back too),
        #: and numbers are never used twice, so a cached answer stays valid whenever its
        #: number is the node's
        self.version = dict.fromkeys(self.order, 0)
        self._clock = 0
        #: the same for the whole state: a new number on every change, the earlier one back on
        #: a rollback (so equal numbers mean equal states: a pass's failures are keyed on it)
        self.gen = 0
        #: free GPUs per node in cluster order (the walk's vectorised skipping)
        self.free_arr = np.array([len(n.free_gpus) for n in nodes], dtype=np.int64)
        #: per ``privileged`` flag, the sigma-minus of each node's lowest donor for the node's
        #: current version as :meth:`Rubick._lowest_donor` found it for a receiver not on the
        #: node (inf: no donor; NaN: not asked since the node last changed)
        self.dsig = {flag: np.full(len(nodes), np.nan) for flag in (False, True)}

    def set(self, job_id: str, new: Alloc | None, *, record: bool = True) -> None:
        old = self.alloc.get(job_id)
        version = self.version
        if record:
            self.journal.append((job_id, old, [
                (n, version[n]) for a in (old, new) if a is not None for n, _ in a.gpus],
                self.gen))
        nodes = self.nodes
        touched: list[NodeState] = []  # each node once (a job resized on a node is on both)
        if old is not None:
            for n, g in old.gpus:
                st = nodes[n]
                st.free_gpus.update(g)
                st.jobs.discard(job_id)
                touched.append(st)
            for n, c in old.cpus:
                nodes[n].free_cpus += c
            for n, m in old.mem:
                nodes[n].free_mem += m
        self.alloc[job_id] = new
        if new is not None:
            for n, g in new.gpus:
                st = nodes[n]
                if not st.free_gpus.issuperset(g):
                    raise AssertionError(f"GPUs {g} of {n} not free for {job_id}")
                st.free_gpus.difference_update(g)
                st.jobs.add(job_id)
                if st not in touched:
                    touched.append(st)
            for n, c in new.cpus:
                nodes[n].free_cpus -= c
            for n, m in new.mem:
                nodes[n].free_mem -= m
        # every touched node: re-filed by its free GPUs, a new number, its donor slopes unknown
        index, pos, free_arr = self.free_index, self.pos, self.free_arr
        d_be, d_priv = self.dsig[False], self.dsig[True]
        clock = self._clock
        for st in touched:
            n = st.name
            free = len(st.free_gpus)
            index.set(n, free)
            clock += 1
            version[n] = clock
            i = pos[n]
            free_arr[i] = free
            d_be[i] = np.nan
            d_priv[i] = np.nan
        self._clock = self.gen = clock + 1

    def mark(self) -> int:
        return len(self.journal)

    def rollback(self, mark: int) -> None:
        while len(self.journal) > mark:
            job_id, old, versions, gen = self.journal.pop()
            self.set(job_id, old, record=False)
            for n, v in reversed(versions):
                self.version[n] = v
            self.gen = gen
