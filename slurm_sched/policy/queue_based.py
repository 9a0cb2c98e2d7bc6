"""Building blocks shared by the queue-ordering baselines (FIFO, SJF, SRTF, SRSF, Tiresias).

Two shapes:
- :func:`start_in_order` — non-preemptive: walk pending jobs in priority order and start those
  that fit (optionally stopping at the first that does not: head-of-line blocking).
- :func:`preemptive_in_order` — walk *all* active jobs in priority order, mark a job to run if its
  GPU count still fits the cluster's remaining GPUs (counting, not blocking); preempt running
  jobs that were not marked, keep marked running jobs where they are, and place the newly marked
  ones in the GPUs that are then free. :func:`preemptive_by_key` ranks the jobs by a sort key
  first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from slurm_sched.model import Action, ClusterSnapshot, JobState, JobView, Placement, Preempt, Start
from slurm_sched.policy.placement import (
    FreeIndex,
    FreeMap,
    free_map,
    pack_consolidated,
    pack_most_free,
)

Packer = Callable[[FreeMap, int], Placement | None]


def _free_for(free: FreeMap, snapshot: ClusterSnapshot, gpu_type: str | None,
              views: dict[str, FreeMap] | None = None) -> FreeMap:
    """The part of ``free`` a job may use (same lists, so taking GPUs updates ``free``).

    ``views`` caches the per-type parts for one pass: they share ``free``'s lists, so they stay
    current as long as no node is added to or removed from ``free``.
    """
    if gpu_type is None:
        return free
    if views is not None and gpu_type in views:
        return views[gpu_type]
    by_name = snapshot.cluster.by_name
    view = {n: g for n, g in free.items() if by_name[n].gpu_type == gpu_type}
    if views is not None:
        views[gpu_type] = view
    return view


def _placer(
    free: FreeMap, snapshot: ClusterSnapshot, packer: Packer
) -> Callable[[int, str | None], Placement | None]:
    """``packer`` on the part of ``free`` of a GPU type, for many jobs in a row.

    The two shared packers go through a :class:`FreeIndex` (same placements, without scanning
    every node per job: thousands of jobs on thousands of nodes); any other packer is called on
    the per-type views of ``free``.
    """
    if packer is pack_consolidated or packer is pack_most_free:
        by_name = snapshot.cluster.by_name
        index = FreeIndex(free, {n: by_name[n].gpu_type for n in free})
        return index.consolidated if packer is pack_consolidated else index.most_free
    views: dict[str, FreeMap] = {}

    def place(num_gpus: int, gpu_type: str | None) -> Placement | None:
        return packer(_free_for(free, snapshot, gpu_type, views), num_gpus)

    return place


def start_in_order(
    snapshot: ClusterSnapshot,
    ordered_pending: Iterable[JobView],
    *,
    blocking: bool,
    packer: Packer = pack_consolidated,
    reason: str = "",
) -> list[Action]:
    """Start pending jobs in the given order while they fit (non-preemptive)."""
    if not snapshot.pending:
        return []
    place = _placer(free_map(snapshot), snapshot, packer)
    actions: list[Action] = []
    for job in ordered_pending:
        placement = place(job.spec.num_gpus, job.spec.gpu_type)
        if placement is None:
            if blocking:
                break
            continue
        actions.append(Start(job_id=job.job_id, placement=placement, reason=reason))
    return actions


def all_pending_fit(snapshot: ClusterSnapshot) -> bool:
    """True when every pending job fits the free GPUs at once (one GPU type, untyped jobs).

    Then a preemptive priority policy starts them all and preempts nobody, whatever the
    priorities of the running jobs: policies use this to skip ranking every active job.
    """
    pending = snapshot.pending
    if len(snapshot.cluster.capacity_by_type) > 2:
        return False
    need = 0
    for j in pending:
        if j.spec.gpu_type is not None:
            return False
        need += j.spec.num_gpus
    return need <= snapshot.num_free_gpus


def preemptive_in_order(
    snapshot: ClusterSnapshot,
    ordered_active: list[JobView],
    *,
    packer: Packer,
    reason: str = "",
) -> list[Action]:
    """Run the highest-priority jobs that fit by GPU count, preempting the rest.

    GPU counting is done per GPU type for jobs that require one. Suspended jobs are treated like
    running ones (they hold GPUs) and are preempted when not chosen.
    """
    if not snapshot.pending:
        return []  # nothing waits, so nothing can take a running job's place
    left = dict(snapshot.cluster.capacity_by_type)
    typed = len(left) > 2  # several GPU types: keep per-type counts
    pending_chosen: list[JobView] = []
    to_preempt: list[JobView] = []
    pending = JobState.PENDING
    for job in ordered_active:
        spec = job.spec
        g = spec.num_gpus
        t = spec.gpu_type
        ok = g <= left[None] and (t is None or g <= left.get(t, 0))
        if ok:
            left[None] -= g
            if t is not None:
                left[t] -= g
            elif typed:
                # an untyped job takes GPUs of some type; keep per-type counts conservative
                for k in left:
                    if k is not None:
                        left[k] = min(left[k], left[None])
            if job.state is pending:
                pending_chosen.append(job)
        elif job.state is not pending:
            to_preempt.append(job)
    if not pending_chosen:
        return []  # preempting alone would only idle GPUs
    actions: list[Action] = []
    free = free_map(snapshot)
    touched: set[str] = set()
    occupancy = snapshot.occupancy if to_preempt else {}
    for job in to_preempt:
        actions.append(Preempt(job_id=job.spec.job_id, reason=reason or "lower priority"))
        assert job.placement is not None
        for node, g in job.placement.slots():
            if len(occupancy.get((node, g), ())) == 1:
                free[node].append(g)
                touched.add(node)
    for node in touched:
        free[node].sort()
    place = _placer(free, snapshot, packer)
    for job in pending_chosen:
        placement = place(job.spec.num_gpus, job.spec.gpu_type)
        if placement is None:  # fragmentation across GPU types: wait for the next cycle
            continue
        actions.append(Start(job_id=job.spec.job_id, placement=placement, reason=reason))
    return actions


def preemptive_by_key(
    snapshot: ClusterSnapshot,
    key: Callable[[JobView], Any],
    *,
    packer: Packer,
    reason: str,
) -> list[Action]:
    """:func:`preemptive_in_order` over the active jobs sorted by ``key`` (lowest first).

    When every pending job fits now (:func:`all_pending_fit`) only the pending jobs are ranked:
    nobody gets preempted then, so the running jobs' ranks do not matter.
    """
    jobs = snapshot.pending if all_pending_fit(snapshot) else snapshot.jobs
    return preemptive_in_order(snapshot, sorted(jobs, key=key), packer=packer, reason=reason)
