"""Gandiva_fair's placement: admission of pending jobs (by held GPUs per ticket, then arrival),
the choice of pool, server and GPUs, and the pass a placed job joins its pool at.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from slurm_sched.model import JobView, Node, Placement, Share, Start
from slurm_sched.policy.gandiva_fair.admission import AdmitCache, PickIndex, WideIndex
from slurm_sched.policy.gandiva_fair.cycle import Cycle
from slurm_sched.policy.gandiva_fair.job_state import HeldJob
from slurm_sched.policy.gandiva_fair.tickets import ANY_POOL, job_type, speed, ticket
from slurm_sched.policy.gandiva_stride import Slot

if TYPE_CHECKING:
    from slurm_sched.policy.gandiva_fair.policy import GandivaFair


def admit(pol: GandivaFair, cy: Cycle) -> None:
    """Place pending jobs while GPUs have room, users by held GPUs per ticket, then arrival."""
    snap = cy.snap
    pending = [j for j in snap.pending]
    if not pending:
        return
    cap = pol.max_jobs_per_gpu
    room = sum(  # free (GPU, job) places: a cheap upper bound for the placement search
        max(0, cap - len(cy.holders.get((n.name, g), ())))
        for n in snap.cluster.nodes for g in range(n.num_gpus)
    )
    if room == 0:
        return
    held_gpus: dict[str, float] = defaultdict(float)
    for h in cy.held.values():
        held_gpus[h.user] += h.size
    queues: dict[str, list[JobView]] = defaultdict(list)
    for j in sorted(pending, key=lambda v: pol.mem[v.spec.job_id].seq):
        queues[j.spec.user].append(j)
    heap = [
        (held_gpus[u] / cy.user_tickets[u], pol.mem[q[0].spec.job_id].seq, u)
        for u, q in queues.items()
    ]
    heapq.heapify(heap)
    cy.admit = _admit_cache(pol, cy)
    try:
        _admit_loop(pol, cy, heap, queues, held_gpus, room)
    finally:
        cy.admit = None


def _admit_cache(pol: GandivaFair, cy: Cycle) -> AdmitCache:
    cache = AdmitCache(
        load={slot: sum(cy.held[j].share for j in h) for slot, h in cy.holders.items()},
        count={slot: len(h) for slot, h in cy.holders.items()},
        per_user_pool=defaultdict(int), pool_gpus=defaultdict(int),
        user_pool_gpus=defaultdict(int), passes={},
    )
    for h in cy.held.values():
        cache.per_user_pool[(h.user, h.pool)] += 1
        cache.pool_gpus[h.pool] += h.size
        cache.user_pool_gpus[(h.user, h.pool)] += h.size
        _add_pass(pol, cache, h)
    return cache


def _add_pass(pol: GandivaFair, cache: AdmitCache, h: HeldJob) -> None:
    pass_ = pol.mem[h.job_id].pass_
    if pass_ is None:
        return
    sums = cache.passes.setdefault(h.pool, [0, 0, 0, 0, 0, 0])
    for at in ((0, 3) if not h.capped else (3,)):
        sums[at] += h.tickets
        sums[at + 1] += h.tickets * (pass_ or 0.0)
        sums[at + 2] += 1


def _admit_loop(pol: GandivaFair, cy: Cycle, heap: list[tuple[float, int, str]],
                queues: dict[str, list[JobView]], held_gpus: dict[str, float],
                room: int) -> None:
    while heap and room > 0:
        _, _, u = heapq.heappop(heap)
        q = queues[u]
        placed = False
        while q:
            j = q.pop(0)
            if j.spec.num_gpus <= room and _place_new(pol, cy, j):
                room -= j.spec.num_gpus
                held_gpus[u] += j.spec.num_gpus
                placed = True
                break
        if placed and q:
            heapq.heappush(
                heap, (held_gpus[u] / cy.user_tickets[u], pol.mem[q[0].spec.job_id].seq, u)
            )


def _candidate_pools(pol: GandivaFair, cy: Cycle, job: JobView) -> list[str]:
    pools = cy.pools
    if job.spec.gpu_type is not None:
        allowed = [job.spec.gpu_type] if job.spec.gpu_type in pools else []
    else:
        allowed = list(pools)
    fitting = [g for g in allowed if pools[g] >= job.spec.num_gpus]
    if not fitting:
        return [ANY_POOL] if sum(pools[g] for g in allowed) >= job.spec.num_gpus else []
    if len(fitting) == 1:
        return fitting
    user = job.spec.user
    jt = job_type(pol, job.spec)
    demand: dict[str, float] = defaultdict(float)
    pool_demand: dict[str, float] = defaultdict(float)
    admit = cy.admit
    if admit is None:
        for h in cy.held.values():
            pool_demand[h.pool] += h.size
            if h.user == user:
                demand[h.pool] += h.size
    size = job.spec.num_gpus
    ent = cy.entitlement.get(user, {})
    scored: list[tuple[float, float, str]] = []
    for g in fitting:
        if admit is not None:  # the same sums (of ints), kept up to date
            pd = float(admit.pool_gpus.get(g, 0))
            d = float(admit.user_pool_gpus.get((user, g), 0))
        else:
            pd, d = pool_demand[g], demand[g]
        r = speed(pol, jt, g)
        # idle room: runs at once, nobody is slowed down
        got = 1.0 if pd + size <= pools[g] else min(1.0, ent.get(g, 0.0) / (d + size))
        scored.append((-r * got, -r, g))
    scored.sort()  # the pools by (-r * got, -r, name)
    return [g for *_, g in scored]


def servers(cy: Cycle, pool: str, job: JobView) -> list[Node]:
    """The servers with GPUs of ``pool`` (for :data:`ANY_POOL`, of the job's GPU type if any)."""
    want = job.spec.gpu_type
    return [
        n for n in cy.snap.cluster.nodes
        if n.num_gpus > 0
        and (n.gpu_type == pool or (pool == ANY_POOL and (want is None or n.gpu_type == want)))
    ]


def choose_gpus(
    pol: GandivaFair,
    cy: Cycle,
    nodes: list[Node],
    size: int,
    share: float,
    exclude: str | None = None,
    only_free: bool = False,
) -> Placement | None:
    """The GPUs that minimise the resulting load (:mod:`.policy` docstring: placement), or None.
    ``only_free``: use only GPUs no other job holds."""
    cap = 1 if only_free else pol.max_jobs_per_gpu
    order = {n.name: i for i, n in enumerate(nodes)}
    best: tuple[Any, ...] | None = None
    best_p: Placement | None = None
    if any(n.num_gpus >= size for n in nodes):
        for n in nodes:
            if n.num_gpus < size:
                continue
            avail = [
                (cy.load((n.name, g), exclude), cy.count((n.name, g), exclude), g)
                for g in range(n.num_gpus)
                if cy.count((n.name, g), exclude) < cap
            ]
            if len(avail) < size:
                continue
            for pick in _slot_sets(avail, size, n.num_gpus):
                score = (
                    round(max(a[0] for a in pick) + share, 9),
                    round(sum(a[0] for a in pick), 9),
                    sum(a[1] for a in pick),
                    order[n.name],
                )
                if best is None or score < best:
                    best = score
                    best_p = Placement.of({n.name: sorted(a[2] for a in pick)})
        return best_p
    # Wider than a server: the least loaded servers, fewest first.
    ranked = []
    for n in nodes:
        avail = sorted(
            (cy.load((n.name, g), exclude), cy.count((n.name, g), exclude), g)
            for g in range(n.num_gpus)
            if cy.count((n.name, g), exclude) < cap
        )
        if avail:
            mean = sum(a[0] for a in avail) / len(avail)
            ranked.append((-(len(avail) == n.num_gpus), round(mean, 9), order[n.name], n,
                           avail))
    ranked.sort(key=lambda r: r[:3])
    alloc: dict[str, list[int]] = {}
    left = size
    for *_, n, avail in ranked:
        take = avail[:left]
        alloc[n.name] = sorted(a[2] for a in take)
        left -= len(take)
        if left == 0:
            return Placement.of(alloc)
    return None


def _choose_admit(pol: GandivaFair, cy: Cycle, key: tuple[str, str | None], nodes: list[Node],
                  size: int, share: float) -> Placement | None:
    """:func:`choose_gpus` (no job excluded, any GPU under the capacity) during
    admission: single-server sets through a :class:`PickIndex`."""
    admit = cy.admit
    assert admit is not None
    widest = admit.widest.get(key)
    if widest is None:
        widest = admit.widest[key] = max((n.num_gpus for n in nodes), default=0)
    if widest < size:  # wider than a server: _choose_gpus' multi-server ranking
        wide = admit.wide.get(key)
        if wide is None:
            wide = admit.wide[key] = WideIndex(nodes, pol.max_jobs_per_gpu, admit)
        return wide.take(size)
    index = admit.picks.get((*key, size))
    if index is None:
        index = admit.picks[(*key, size)] = PickIndex(
            nodes, size, pol.max_jobs_per_gpu, admit)
    got = index.best(share)
    if got is None:
        return None
    placement = admit.placements.get(got)
    if placement is None:  # frozen: one object per GPU set and cycle
        placement = admit.placements[got] = Placement.of({got[0]: list(got[1])})
    return placement


def _slot_sets(
    avail: list[tuple[float, int, int]], size: int, num_gpus: int
) -> list[list[tuple[float, int, int]]]:
    """Candidate GPU sets of ``size`` on one server from ``avail`` (load, jobs, index).

    A power-of-two gang narrower than a power-of-two server takes an aligned block
    (``size * k .. size * (k + 1) - 1``), so gangs of one width time-slice the same GPUs
    and pack without holes; otherwise (or when no block has room) the least loaded GPUs.
    """
    by_index = {a[2]: a for a in avail}
    aligned = (
        size > 1 and size < num_gpus
        and size & (size - 1) == 0 and num_gpus & (num_gpus - 1) == 0
    )
    if aligned:
        blocks = []
        for start in range(0, num_gpus, size):
            block = [by_index.get(g) for g in range(start, start + size)]
            if all(b is not None for b in block):
                blocks.append([b for b in block if b is not None])
        if blocks:
            return blocks
    return [sorted(avail)[:size]]


def _place_new(pol: GandivaFair, cy: Cycle, job: JobView) -> bool:
    for pool in _candidate_pools(pol, cy, job):
        key = (pool, job.spec.gpu_type if pool == ANY_POOL else None)
        if cy.admit is not None:
            nodes = cy.admit.servers.get(key) or servers(cy, pool, job)
            cy.admit.servers[key] = nodes
        else:
            nodes = servers(cy, pool, job)
        if cy.admit is not None:
            n_user = cy.admit.per_user_pool.get((job.spec.user, pool), 0)
        else:
            n_user = sum(1 for h in cy.held.values()
                         if h.user == job.spec.user and h.pool == pool)
        t = ticket(cy, job.spec.user, pool, n_user + 1)
        lam = cy.lam.get(pool, math.inf)
        share = min(1.0, lam * t / job.spec.num_gpus)
        if cy.admit is not None:
            p = _choose_admit(pol, cy, key, nodes, job.spec.num_gpus, share)
        else:
            p = choose_gpus(pol, cy, nodes, job.spec.num_gpus, share)
        if p is None:
            continue
        _occupy(cy, job, p, pool, share, t)
        mem = pol.mem[job.job_id]
        if mem.pass_ is None:
            mem.pass_ = mem.due = join_pass(pol, cy, pool)
        if cy.admit is not None:
            _add_pass(pol, cy.admit, cy.held[job.job_id])
        mem.placed_at_s = cy.now
        return True
    return False


def _occupy(
    cy: Cycle, job: JobView, p: Placement, pool: str, share: float, tickets: float
) -> None:
    """Record a placement and emit its Start/Share."""
    jid = job.spec.job_id
    holders = cy.holders
    slot_list = list(p.slots())
    start_or_share(cy, jid, p, slot_list, "gandiva-fair: time-slice GPUs",
                         "gandiva-fair: place")
    slots = frozenset(slot_list)
    size = len(slots)  # p.num_gpus
    nodes = p.nodes
    cy.held[jid] = HeldJob(
        view=job, user=job.spec.user, size=size, pool=pool, slots=slots,
        servers=nodes, running=True, tickets=tickets, share=share,
    )
    for s in slots:
        holders[s].append(jid)
    cy.version += 1
    admit = cy.admit
    if admit is not None:
        load, count = admit.load, admit.count
        for s in slots:
            load[s] = load.get(s, 0) + share
            count[s] = count.get(s, 0) + 1
        for n in nodes:
            for index in admit.watchers.get(n, ()):
                index.dirty.add(n)
                admit.avail.pop((n, index.cap), None)
        admit.per_user_pool[(job.spec.user, pool)] += 1
        admit.pool_gpus[pool] += size
        admit.user_pool_gpus[(job.spec.user, pool)] += size
    cy.newly_running.add(jid)


def start_or_share(cy: Cycle, job_id: str, p: Placement, slots: Iterable[Slot],
                   share_reason: str, start_reason: str) -> None:
    """Emit a Start on ``p``, or a Share with the jobs holding any of its ``slots``."""
    others = sorted({o for s in slots for o in cy.holders.get(s, ())})
    if others:
        cy.pre.append(Share(job_id=job_id, placement=p, with_jobs=tuple(others),
                            reason=share_reason))
    else:
        cy.pre.append(Start(job_id=job_id, placement=p, reason=start_reason))


def join_pass(pol: GandivaFair, cy: Cycle, pool: str) -> float:
    """Pool virtual time: ticket-weighted mean pass of its uncapped jobs (all jobs when
    every one is capped); the last known value for an empty pool."""
    if cy.admit is not None:
        sums = cy.admit.passes.get(pool, [0, 0, 0, 0, 0, 0])
        den, num = (sums[0], sums[1]) if sums[2] else (sums[3], sums[4])
        if den > 0:
            pol.pool_vt[pool] = num / den
        return pol.pool_vt.get(pool, 0.0)
    hs = [h for h in cy.held.values() if h.pool == pool and pol.mem[h.job_id].pass_
          is not None]
    pick = [h for h in hs if not h.capped] or hs
    den = sum(h.tickets for h in pick)
    if den > 0:
        vt = sum(h.tickets * (pol.mem[h.job_id].pass_ or 0.0) for h in pick) / den
        pol.pool_vt[pool] = vt
    return pol.pool_vt.get(pool, 0.0)
