"""What SJF-BSBF knows during one pass: running jobs and sharing candidates (:class:`Runner`,
:class:`Candidate`, :class:`SharingChoice`), candidate sequences built lazily (:class:`LazyCands`,
:class:`ExcludingCands`), and the cluster's GPU slots with their owners (:class:`PassState`).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from slurm_sched.model import ClusterSnapshot, JobSettings, JobState, JobView, Placement
from slurm_sched.perf.sjf_bsbf_model import JobProfile
from slurm_sched.policy.placement import FreeIndex, FreeMap, free_map

Slot = tuple[str, int]
#: A sharing candidate: (pair JCT, running job id, sub-batch).
Cand = tuple[float, str, int | None]
#: What BEST_SHARING reads of a running job besides its remaining time: (app, sub-batch, memory).
RunnerClass = tuple[str | None, int | None, float]
#: A pending job's application and (sub-batch, memory) options.
OptionsKey = tuple[str | None, tuple[tuple[int | None, float], ...]]
#: The sub-batches (option numbers) of a pending job that pass MEM_OK next to a runner class,
#: with their xi pair (xi of the running job, xi of the new job).
Signature = tuple[tuple[int, float, float], ...]


@dataclass(frozen=True, slots=True)
class Runner:
    """What a pending job needs to know about a running job it might share with."""

    job_id: str
    app: str | None
    sub_batch: int | None
    remaining_alone_s: float
    mem_gb: float


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pending job's options: (sub-batch, run time alone with it, memory)."""

    job: JobView
    profile: JobProfile | None
    options: tuple[tuple[int | None, float, float], ...]
    exclusive_s: float
    #: (app, ((sub-batch, memory), ...)) and whether every time is a finite number >= 0, for
    #: :meth:`SjfBsbf._ranked` (None: computed there)
    osig: OptionsKey | None = None
    regular: bool = False

    @property
    def app(self) -> str | None:
        return self.profile.app if self.profile else None

    def settings(self, b: int | None) -> JobSettings:
        if self.profile is None or b is None:
            return JobSettings()
        return self.profile.settings_for(b)


@dataclass(frozen=True, slots=True)
class SharingChoice:
    """BEST_SHARING's outcome for one (new job, running job) pair."""

    share: bool
    sub_batch: int | None
    t_pair: float


class LazyCands(Sequence[Cand]):
    """Candidates produced as far as they are read (the same sequence either way): the
    composition takes the first few of thousands of running jobs, so the rest are not
    examined."""

    def __init__(self, source: Iterator[Cand]) -> None:
        self._source = source
        self._done: list[Cand] = []

    def _fill(self, n: int | None) -> None:
        while n is None or len(self._done) < n:
            nxt = next(self._source, None)
            if nxt is None:
                break
            self._done.append(nxt)

    def __iter__(self) -> Iterator[Cand]:
        i = 0
        while True:
            if i == len(self._done):
                self._fill(i + 1)
                if i == len(self._done):
                    return
            yield self._done[i]
            i += 1

    def __bool__(self) -> bool:
        self._fill(1)
        return bool(self._done)

    def __len__(self) -> int:
        self._fill(None)
        return len(self._done)

    @overload
    def __getitem__(self, i: int) -> Cand: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Cand]: ...
    def __getitem__(self, i: int | slice) -> Cand | Sequence[Cand]:
        self._fill(None)
        return self._done[i]


class ExcludingCands(Sequence[Cand]):
    """A :class:`LazyCands` source without the candidates of some running jobs, read as far as
    needed; what was already read is kept filtered in ``head``."""

    def __init__(self, source: LazyCands, head: list[Cand], pos: int,
                 excluded: frozenset[str]) -> None:
        self._source = source
        self._head = head
        self._pos = pos  # source items before this index are accounted for in head
        self._excluded = excluded

    def narrowed(self, bad: Iterable[str]) -> ExcludingCands:
        """The same without the candidates of ``bad`` too."""
        excluded = self._excluded.union(bad)
        done = self._source._done
        head = [c for c in self._head if c[1] not in excluded]
        head.extend(c for c in done[self._pos:] if c[1] not in excluded)
        return ExcludingCands(self._source, head, len(done), excluded)

    def __iter__(self) -> Iterator[Cand]:
        yield from self._head
        source, excluded, i = self._source, self._excluded, self._pos
        done = source._done
        while True:
            if i == len(done):
                source._fill(i + 1)
                if i == len(done):
                    return
            c = done[i]
            i += 1
            if c[1] not in excluded:
                yield c

    def __bool__(self) -> bool:
        return next(iter(self), None) is not None

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @overload
    def __getitem__(self, i: int) -> Cand: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Cand]: ...
    def __getitem__(self, i: int | slice) -> Cand | Sequence[Cand]:
        return list(self)[i]


def _regular(x: float) -> bool:
    """A finite number >= 0 (what the monotonicity argument of the ranked search needs)."""
    return 0.0 <= x < math.inf


def options_key(cand: Candidate) -> tuple[OptionsKey, bool]:
    """``cand.osig`` and ``cand.regular`` computed."""
    osig = (cand.app, tuple((b, mem) for b, _, mem in cand.options))
    return osig, _regular(cand.exclusive_s) and all(_regular(d) for _, d, _ in cand.options)


class _OwnerIndex:
    """The running jobs holding at least one G_OJ GPU of one key (None = any type), grouped by
    :data:`RunnerClass` and sorted by (remaining time alone, job id) within a group.

    BEST_SHARING sees a running job only through its class and its remaining time, and its
    pair JCT grows with the remaining time (see :meth:`SjfBsbf._ranked`). Jobs whose remaining
    time is not a finite number >= 0 are kept apart (``odd``) and always evaluated.
    """

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.classes: dict[RunnerClass, list[tuple[float, str]]] = {}
        self.odd: set[str] = set()
        self._where: dict[str, tuple[RunnerClass, float] | None] = {}
        #: bumped whenever a class appears or empties (invalidates ``groups``)
        self.version = 0
        #: candidate options -> (version, [(signature, classes)]), see ``SjfBsbf._ranked``
        self.groups: dict[object, tuple[int, list[tuple[Signature, list[RunnerClass]]]]] = {}

    def add(self, rid: str, run: Runner) -> None:
        self.remove(rid)
        d = run.remaining_alone_s
        if not _regular(d):
            self.odd.add(rid)
            self._where[rid] = None
            return
        key = (run.app, run.sub_batch, run.mem_gb)
        lst = self.classes.get(key)
        if lst is None:
            lst = self.classes[key] = []
            self.version += 1
        insort(lst, (d, rid))
        self._where[rid] = (key, d)

    def remove(self, rid: str) -> None:
        if rid not in self._where:
            return
        where = self._where.pop(rid)
        if where is None:
            self.odd.discard(rid)
            return
        key, d = where
        lst = self.classes[key]
        del lst[bisect_left(lst, (d, rid))]
        if not lst:
            del self.classes[key]
            self.version += 1

    def members(self) -> Iterable[str]:
        return self._where.keys()


class PassState:
    """Mutable per-pass view: GPU holders and free GPUs, updated as the pass places jobs.

    A pass considers every pending job on clusters of thousands of GPUs, so what each job asks
    for is kept up to date rather than recomputed: free GPUs in a :class:`FreeIndex` (counts
    per GPU type, consolidated packing), and the GPUs holding exactly one running job (G_OJ) as
    sorted (server, GPU) positions, for all servers and per GPU type. :meth:`place` is the only
    way holders and free GPUs change during the pass.
    """

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        nodes = snapshot.cluster.nodes
        self.node_index = {n.name: i for i, n in enumerate(nodes)}
        self._names = [n.name for n in nodes]
        self._type_of = {n.name: n.gpu_type for n in nodes}
        self.free: FreeMap = free_map(snapshot)
        self.free_index = FreeIndex(self.free, self._type_of)
        self._views: dict[str, FreeMap] = {}
        # tuples, replaced on change: fewer objects for the garbage collector to track
        self.holders: dict[Slot, tuple[str, ...]] = dict(snapshot.occupancy)
        self.slots_of: dict[str, tuple[Slot, ...]] = {}
        for j in snapshot.jobs:
            if j.placement is not None and j.state is not JobState.PENDING:
                self.slots_of[j.job_id] = tuple(sorted(j.placement.slots(), key=self.slot_key))
        self.runners: dict[str, Runner] = {}
        self.suspended = {j.job_id for j in snapshot.suspended}
        #: owner indexes (per key), built on first use and kept up to date afterwards
        self._owner_idx: dict[str | None, _OwnerIndex] = {}
        #: key (None = all servers, else a GPU type) -> sorted (server index, GPU) of G_OJ
        self._singles: dict[str | None, list[tuple[int, int]]] = {None: []}
        for t in self._type_of.values():
            self._singles.setdefault(t, [])
        self._single_set: set[Slot] = set()
        for slot, h in self.holders.items():
            if len(h) == 1 and h[0] not in self.suspended and slot[0] in self.node_index:
                self._single_set.add(slot)
        for slot in sorted(self._single_set, key=self.slot_key):
            pos = self.slot_key(slot)
            self._singles[None].append(pos)
            self._singles[self._type_of[slot[0]]].append(pos)

    def slot_key(self, slot: Slot) -> tuple[int, int]:
        return self.node_index[slot[0]], slot[1]

    def nodes_of_type(self, gpu_type: str | None) -> set[str] | None:
        if gpu_type is None:
            return None
        by_name = self.snapshot.cluster.by_name
        return {n for n in self.free if by_name[n].gpu_type == gpu_type}

    def free_for(self, gpu_type: str | None) -> FreeMap:
        """The free GPUs of a type (the same lists as ``free``: do not change them)."""
        if gpu_type is None:
            return self.free
        view = self._views.get(gpu_type)
        if view is None:
            allowed = self.nodes_of_type(gpu_type)
            assert allowed is not None
            view = {n: g for n, g in self.free.items() if n in allowed}
            self._views[gpu_type] = view
        return view

    def free_count(self, gpu_type: str | None) -> int:
        return self.free_index.total(gpu_type)

    def _single_positions(self, gpu_type: str | None) -> list[tuple[int, int]]:
        return self._singles.get(gpu_type, [])

    def single_count(self, gpu_type: str | None) -> int:
        return len(self._single_positions(gpu_type))

    def iter_singles(self, gpu_type: str | None) -> Iterable[Slot]:
        """G_OJ of a type in (server, GPU) order, lazily (do not place while iterating)."""
        names = self._names
        return ((names[i], g) for i, g in self._single_positions(gpu_type))

    def single_slots(self, gpu_type: str | None) -> list[Slot]:
        """GPUs holding exactly one job that is running (G_OJ), in (server, GPU) order."""
        return list(self.iter_singles(gpu_type))

    def is_single(self, slot: Slot, gpu_type: str | None) -> bool:
        """``slot`` is in G_OJ of that type."""
        return slot in self._single_set and (
            gpu_type is None or self._type_of.get(slot[0]) == gpu_type)

    def _file_single(self, slot: Slot, add: bool) -> None:
        pos = self.slot_key(slot)
        owner = self.holders[slot][0]  # the job holding the GPU alone (before / after)
        for key in (None, self._type_of[slot[0]]):
            lst = self._singles[key]
            if add:
                insort(lst, pos)
            else:
                del lst[bisect_left(lst, pos)]
            idx = self._owner_idx.get(key)
            if idx is not None:
                n = idx.count.get(owner, 0) + (1 if add else -1)
                if n > 0:
                    idx.count[owner] = n
                    if n == 1 and owner in self.runners:
                        idx.add(owner, self.runners[owner])
                else:
                    idx.count.pop(owner, None)
                    idx.remove(owner)
        if add:
            self._single_set.add(slot)
        else:
            self._single_set.discard(slot)

    def add_runner(self, job_id: str, run: Runner) -> None:
        """Record what sharing needs to know about a running (or just placed) job."""
        self.runners[job_id] = run
        for idx in self._owner_idx.values():
            if idx.count.get(job_id, 0) > 0:
                idx.add(job_id, run)

    def owner_index(self, gpu_type: str | None) -> _OwnerIndex:
        """The running jobs holding a G_OJ GPU of the type (the set ``SjfBsbf._owners``
        yields), indexed for the ranked search; maintained by :meth:`place` from now on."""
        idx = self._owner_idx.get(gpu_type)
        if idx is None:
            idx = _OwnerIndex()
            names, holders = self._names, self.holders
            for i, g in self._single_positions(gpu_type):
                rid = holders[(names[i], g)][0]
                idx.count[rid] = idx.count.get(rid, 0) + 1
            for rid in idx.count:
                run = self.runners.get(rid)
                if run is not None:
                    idx.add(rid, run)
            self._owner_idx[gpu_type] = idx
        return idx

    def pack(self, num_gpus: int, gpu_type: str | None) -> Placement | None:
        """``pack_consolidated`` on the free GPUs of a type (taken from ``free``)."""
        return self.free_index.consolidated(num_gpus, gpu_type)

    def place(self, job_id: str, slots: Iterable[Slot]) -> None:
        slots = sorted(slots, key=self.slot_key)
        running = job_id not in self.suspended
        for node, g in slots:
            h = (*self.holders.get((node, g), ()), job_id)
            self.holders[(node, g)] = h
            was_single = (node, g) in self._single_set
            if was_single:
                self._file_single((node, g), add=False)
            elif len(h) == 1 and running:
                self._file_single((node, g), add=True)
            if g in self.free[node]:
                self.free_index.remove(node, g)
        self.slots_of[job_id] = tuple(slots)


def placement_of(slots: Sequence[Slot], state: PassState) -> Placement:
    alloc: dict[str, list[int]] = {}
    for node, g in sorted(slots, key=state.slot_key):
        alloc.setdefault(node, []).append(g)
    return Placement.of(alloc)
