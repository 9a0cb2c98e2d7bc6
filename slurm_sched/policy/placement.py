"""Shared placement helpers: pure functions over a mutable free-GPU map.

``free`` maps node name -> sorted list of free GPU indices, in cluster order. Helpers that
choose GPUs also remove them from ``free`` so a policy can place several jobs in one cycle.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Container, Mapping

from slurm_sched.model import ClusterSnapshot, Placement

FreeMap = dict[str, list[int]]


def free_map(snapshot: ClusterSnapshot, gpu_type: str | None = None) -> FreeMap:
    """A mutable copy of the snapshot's free GPUs, optionally only nodes of ``gpu_type``."""
    if gpu_type is None:
        return {n: list(g) for n, g in snapshot.free_gpus.items()}
    by_name = snapshot.cluster.by_name
    return {n: list(g) for n, g in snapshot.free_gpus.items() if by_name[n].gpu_type == gpu_type}


def _take(free: FreeMap, alloc: dict[str, list[int]]) -> Placement:
    for node, gpus in alloc.items():
        left = free[node]
        for g in gpus:
            left.remove(g)
    return Placement.of(alloc)


def _free_counts_if_fits(free: FreeMap, num_gpus: int) -> list[int] | None:
    """The free-GPU count of every node of ``free`` (in its order), or None when a job of
    ``num_gpus`` GPUs cannot be placed at all (no GPUs asked, or too few free in total)."""
    if num_gpus <= 0:
        return None
    counts = list(map(len, free.values()))
    if sum(counts) < num_gpus:
        return None
    return counts


def pack_consolidated(free: FreeMap, num_gpus: int) -> Placement | None:
    """Consolidated packing: the fewest nodes, least fragmentation.

    If one node can hold the job, pick the node with the fewest free GPUs that still fits (best
    fit, ties by cluster order). Otherwise fill whole nodes, most free GPUs first (ties by
    cluster order), until the job is covered. Returns None if the job does not fit at all.
    """
    # Per-node counts in one C-level pass: policies call this once per job on clusters of
    # thousands of nodes, so the scans below use list.index / `in` rather than Python loops.
    counts = _free_counts_if_fits(free, num_gpus)
    if counts is None:
        return None
    names = list(free)
    top = max(counts)
    if top >= num_gpus:
        for n in range(num_gpus, top + 1):
            if n in counts:  # best fit: the fewest free GPUs that fit, first in cluster order
                best = names[counts.index(n)]
                return _take(free, {best: free[best][:num_gpus]})
    # stable sort, so ties stay in cluster order
    order = sorted((i for i, n in enumerate(counts) if n), key=counts.__getitem__, reverse=True)
    alloc: dict[str, list[int]] = {}
    need = num_gpus
    for i in order:
        node = names[i]
        take = free[node][:need]
        alloc[node] = take
        need -= len(take)
        if need == 0:
            break
    return _take(free, alloc)


def _most_free_first(counts: list[int], k: int) -> list[int]:
    """Positions of the ``k`` nodes with the most free GPUs (ties by position), best first."""
    out: list[int] = []
    for n in range(max(counts), 0, -1):
        at = 0
        while len(out) < k:
            try:
                at = counts.index(n, at)
            except ValueError:
                break
            out.append(at)
            at += 1
        if len(out) == k:
            break
    return out


def pack_most_free(free: FreeMap, num_gpus: int) -> Placement | None:
    """Tiresias-style spreading: take GPUs one at a time from the node with the most free GPUs.

    Ties go to cluster order. Returns None if the job does not fit.
    """
    counts = _free_counts_if_fits(free, num_gpus)
    if counts is None:
        return None
    names = list(free)
    # Only the num_gpus most-free nodes can be picked: a node ranked below them would need all
    # of them to be picked first, which already takes num_gpus picks.
    cand = _most_free_first(counts, num_gpus)
    # heap of (-free count, cluster position): the most free node first, ties by cluster order
    heap = [(-counts[i], i, names[i]) for i in cand]
    heapq.heapify(heap)
    alloc: dict[str, list[int]] = {}
    for _ in range(num_gpus):
        neg, i, node = heapq.heappop(heap)
        taken = alloc.setdefault(node, [])
        taken.append(free[node][len(taken)])
        if neg + 1 < 0:
            heapq.heappush(heap, (neg + 1, i, node))
    return _take(free, alloc)


class CountIndex:
    """Nodes filed under a count (free GPUs...), in cluster order: best-fit and most-first
    queries without scanning every node, for passes that place many jobs on big clusters.

    ``counts`` gives every node in cluster order; :meth:`set` re-files a node whose count
    changed (the caller keeps its own free-GPU lists and reports every change).
    """

    def __init__(self, counts: Mapping[str, int]) -> None:
        self._names = list(counts)
        self._pos = {n: i for i, n in enumerate(self._names)}
        self._count = list(counts.values())
        self.total = sum(self._count)
        self._buckets: dict[int, list[int]] = {}
        for i, c in enumerate(self._count):
            self._buckets.setdefault(c, []).append(i)
        self._keys = sorted(self._buckets)

    def __getitem__(self, node: str) -> int:
        return self._count[self._pos[node]]

    def set(self, node: str, count: int) -> None:
        i = self._pos[node]
        old = self._count[i]
        if old == count:
            return
        bucket = self._buckets[old]
        del bucket[bisect_left(bucket, i)]
        if not bucket:
            del self._buckets[old]
            del self._keys[bisect_left(self._keys, old)]
        if count not in self._buckets:
            self._buckets[count] = []
            insort(self._keys, count)
        insort(self._buckets[count], i)
        self._count[i] = count
        self.total += count - old

    def counts(self) -> list[int]:
        """The distinct counts of the nodes, ascending (read-only)."""
        return self._keys

    def best_fit(self, need: int, skip: Container[str] = ()) -> str | None:
        """The node with the smallest count >= ``need`` (first in cluster order), not in
        ``skip``; None if there is none."""
        for c in self._keys[bisect_left(self._keys, need):]:
            for i in self._buckets[c]:
                name = self._names[i]
                if name not in skip:
                    return name
        return None

    def most(self) -> str | None:
        """The node with the largest count, first in cluster order (None: no nodes)."""
        if not self._keys:
            return None
        return self._names[self._buckets[self._keys[-1]][0]]

    def by_most(self, *, empty: bool = False) -> list[str]:
        """Nodes by count, largest first, ties in cluster order (``empty``: with count 0 or
        less too)."""
        out: list[str] = []
        for c in reversed(self._keys):
            if c <= 0 and not empty:
                break
            out.extend(self._names[i] for i in self._buckets[c])
        return out


class FreeIndex:
    """A free-GPU map indexed by free count: :func:`pack_consolidated` and
    :func:`pack_most_free` in time independent of the number of nodes.

    For a pass that places many jobs on a big cluster (the queue baselines start thousands of
    jobs on thousands of nodes, and each plain call scans every node). Every node is filed under
    its free count, per GPU type and for all types, in cluster order; the placements chosen are
    exactly those of the plain functions on ``free`` (or on its part of one GPU type), and they
    take their GPUs from ``free``'s lists. While the index is in use, ``free`` must change only
    through it.
    """

    def __init__(self, free: FreeMap, gpu_type_of: Mapping[str, str]) -> None:
        self.free = free
        self._names = list(free)
        self._pos = {n: i for i, n in enumerate(self._names)}
        self._counts = [len(g) for g in free.values()]
        self._type = [gpu_type_of[n] for n in self._names]
        top = max(self._counts, default=0)
        #: key (None = every node, else a GPU type) -> free count -> sorted node positions
        self._buckets: dict[str | None, list[list[int]]] = {None: [[] for _ in range(top + 1)]}
        self._total: dict[str | None, int] = {None: 0}
        for i, (c, t) in enumerate(zip(self._counts, self._type, strict=True)):
            if t not in self._buckets:
                self._buckets[t] = [[] for _ in range(top + 1)]
                self._total[t] = 0
            self._buckets[None][c].append(i)
            self._buckets[t][c].append(i)
            self._total[None] += c
            self._total[t] += c

    def total(self, gpu_type: str | None = None) -> int:
        """Free GPUs (of one type)."""
        return self._total.get(gpu_type, 0)

    def consolidated(self, num_gpus: int, gpu_type: str | None = None) -> Placement | None:
        """:func:`pack_consolidated` on the nodes of ``gpu_type`` (None: every node)."""
        if num_gpus <= 0 or self.total(gpu_type) < num_gpus:
            return None
        buckets = self._buckets[gpu_type]
        for c in range(num_gpus, len(buckets)):
            if buckets[c]:  # best fit, first in cluster order
                node = self._names[buckets[c][0]]
                return self._take({node: self.free[node][:num_gpus]})
        alloc: dict[str, list[int]] = {}
        need = num_gpus
        for c in range(len(buckets) - 1, 0, -1):  # most free first, ties in cluster order
            for i in buckets[c]:
                node = self._names[i]
                take = self.free[node][:need]
                alloc[node] = take
                need -= len(take)
                if need == 0:
                    return self._take(alloc)
        raise AssertionError("free GPU totals out of step with the buckets")

    def most_free(self, num_gpus: int, gpu_type: str | None = None) -> Placement | None:
        """:func:`pack_most_free` on the nodes of ``gpu_type`` (None: every node)."""
        if num_gpus <= 0 or self.total(gpu_type) < num_gpus:
            return None
        buckets = self._buckets[gpu_type]
        cand: list[int] = []
        for c in range(len(buckets) - 1, 0, -1):
            cand.extend(buckets[c][: num_gpus - len(cand)])
            if len(cand) == num_gpus:
                break
        heap = [(-self._counts[i], i, self._names[i]) for i in cand]
        heapq.heapify(heap)
        alloc: dict[str, list[int]] = {}
        for _ in range(num_gpus):
            neg, i, node = heapq.heappop(heap)
            taken = alloc.setdefault(node, [])
            taken.append(self.free[node][len(taken)])
            if neg + 1 < 0:
                heapq.heappush(heap, (neg + 1, i, node))
        return self._take(alloc)

    def best_fit_node(self, num_gpus: int, gpu_type: str | None = None) -> str | None:
        """The node with the fewest free GPUs that still holds ``num_gpus`` (first in
        cluster order), or None."""
        buckets = self._buckets.get(gpu_type, [])
        for c in range(max(num_gpus, 0), len(buckets)):
            if buckets[c]:
                return self._names[buckets[c][0]]
        return None

    def nodes_with(self, count: int, limit: int, gpu_type: str | None = None) -> list[str]:
        """The first ``limit`` nodes (cluster order) with exactly ``count`` free GPUs."""
        buckets = self._buckets.get(gpu_type, [])
        if not 0 <= count < len(buckets):
            return []
        return [self._names[i] for i in buckets[count][:limit]]

    def remove(self, node: str, gpu: int) -> None:
        """Take one free GPU out of ``free`` (it must be there)."""
        self._file(node, 1)
        self.free[node].remove(gpu)

    def take(self, alloc: dict[str, list[int]]) -> Placement:
        """Remove ``alloc``'s GPUs from the free lists; their placement."""
        return self._take(alloc)

    def _file(self, node: str, taken: int) -> None:
        """Re-file ``node`` after ``taken`` of its free GPUs go."""
        i = self._pos[node]
        before = self._counts[i]
        after = before - taken
        for key in (None, self._type[i]):
            self._total[key] -= taken
            old = self._buckets[key][before]
            del old[bisect_left(old, i)]
            insort(self._buckets[key][after], i)
        self._counts[i] = after

    def _take(self, alloc: dict[str, list[int]]) -> Placement:
        for node, gpus in alloc.items():
            self._file(node, len(gpus))
        return _take(self.free, alloc)
