"""Shared placement helpers: pure functions over a mutable free-GPU map.

``free`` maps node name -> sorted list of free GPU indices, in cluster order. Helpers that
choose GPUs also remove them from ``free`` so a policy can place several jobs in one cycle.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from slurm_sched.model import Cluster, ClusterSnapshot, Placement

FreeMap = dict[str, list[int]]


def free_map(snapshot: ClusterSnapshot, gpu_type: str | None = None) -> FreeMap:
    """A mutable copy of the snapshot's free GPUs, optionally only nodes of ``gpu_type``."""
    if gpu_type is None:
        return {n: list(g) for n, g in snapshot.free_gpus.items()}
    by_name = snapshot.cluster.by_name
    return {n: list(g) for n, g in snapshot.free_gpus.items() if by_name[n].gpu_type == gpu_type}


def count_free(free: Mapping[str, list[int]]) -> int:
    return sum(len(g) for g in free.values())


def _take(free: FreeMap, alloc: dict[str, list[int]]) -> Placement:
    for node, gpus in alloc.items():
        left = free[node]
        for g in gpus:
            left.remove(g)
    return Placement.of(alloc)


def pack_consolidated(free: FreeMap, num_gpus: int) -> Placement | None:
    """Consolidated packing: the fewest nodes, least fragmentation.

    If one node can hold the job, pick the node with the fewest free GPUs that still fits (best
    fit, ties by cluster order). Otherwise fill whole nodes, most free GPUs first (ties by
    cluster order), until the job is covered. Returns None if the job does not fit at all.
    """
    if num_gpus <= 0 or count_free(free) < num_gpus:
        return None
    best: str | None = None
    best_free = 1 << 30
    for node, gpus in free.items():
        n = len(gpus)
        if num_gpus <= n < best_free:
            best, best_free = node, n
    if best is not None:
        return _take(free, {best: free[best][:num_gpus]})
    order = sorted((n for n in free if free[n]), key=lambda n: -len(free[n]))
    alloc: dict[str, list[int]] = {}
    need = num_gpus
    for node in order:
        take = free[node][:need]
        alloc[node] = take
        need -= len(take)
        if need == 0:
            break
    return _take(free, alloc)


def pack_most_free(free: FreeMap, num_gpus: int) -> Placement | None:
    """Tiresias-style spreading: take GPUs one at a time from the node with the most free GPUs.

    Ties go to cluster order. Returns None if the job does not fit.
    """
    if num_gpus <= 0 or count_free(free) < num_gpus:
        return None
    # heap of (-free count, cluster position): the most free node first, ties by cluster order
    heap = [(-len(g), i, n) for i, (n, g) in enumerate(free.items()) if g]
    heapq.heapify(heap)
    alloc: dict[str, list[int]] = {}
    for _ in range(num_gpus):
        neg, i, node = heapq.heappop(heap)
        taken = alloc.setdefault(node, [])
        taken.append(free[node][len(taken)])
        if neg + 1 < 0:
            heapq.heappush(heap, (neg + 1, i, node))
    return _take(free, alloc)


def fits_type(cluster: Cluster, gpu_type: str | None) -> bool:
    return gpu_type is None or gpu_type in cluster.gpu_types
