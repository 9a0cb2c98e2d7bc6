"""Gandiva_fair's load balancing by migration, once per quantum within a move budget: pool
moves towards each user's entitlement split, moves to free GPUs, load moves off the most loaded
GPUs and pass swaps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING

from slurm_sched.model import Migrate, Placement, Preempt
from slurm_sched.policy.gandiva_fair.cycle import Cycle
from slurm_sched.policy.gandiva_fair.job_state import EPS, HeldJob
from slurm_sched.policy.gandiva_fair.placement import choose_gpus, servers, start_or_share
from slurm_sched.policy.gandiva_fair.tickets import ANY_POOL, shares, ticket
from slurm_sched.policy.gandiva_stride import Slot

if TYPE_CHECKING:
    from slurm_sched.policy.gandiva_fair.policy import GandivaFair


def _movable(pol: GandivaFair, cy: Cycle, h: HeldJob) -> bool:
    mem = pol.mem[h.job_id]
    return (
        not h.moved
        and h.job_id not in cy.newly_running
        and cy.now - mem.placed_at_s >= pol.min_residence_s * mem.backoff - EPS
    )


def _moved(pol: GandivaFair, cy: Cycle, job_id: str) -> None:
    """Book a move: residence restarts; back off if the previous move did not help."""
    mem = pol.mem[job_id]
    if mem.lag_at_move is not None and mem.lag > mem.lag_at_move + EPS:
        mem.backoff = min(16, mem.backoff * 2)
    elif mem.lag_at_move is not None:
        mem.backoff = 1
    mem.lag_at_move = mem.lag
    mem.placed_at_s = cy.now


def rebalance(pol: GandivaFair, cy: Cycle) -> None:
    """One quantum's migrations within ``max_moves_per_round``: pool moves, moves to free
    GPUs, load moves, then pass swaps (two moves each), shares recomputed in between."""
    budget = pol.max_moves_per_round
    budget -= _pool_moves(pol, cy, budget)
    if budget <= 0:
        return
    budget -= _to_free_gpus(pol, cy, budget)
    if budget <= 0:
        return
    shares(cy)
    budget -= _load_moves(pol, cy, budget)
    if budget >= 2:
        shares(cy)
        _swaps(pol, cy, budget)


def _move(pol: GandivaFair, cy: Cycle, h: HeldJob, p: Placement, pool: str) -> None:
    """Move a held job to ``p`` (Migrate to free GPUs, else Preempt + Start/Share)."""
    for s in h.slots:
        cy.holders[s].remove(h.job_id)
    target_free = all(not cy.holders.get(s) for s in p.slots())
    if h.running and target_free:
        cy.pre.append(Migrate(job_id=h.job_id, placement=p, reason="gandiva-fair: balance"))
    else:
        cy.pre.append(Preempt(job_id=h.job_id, reason="gandiva-fair: move"))
        start_or_share(cy, h.job_id, p, p.slots(), "gandiva-fair: move",
                             "gandiva-fair: move")
    h.slots = frozenset(p.slots())
    h.servers = p.nodes
    if h.pool != pool:
        cy.version += 1
    h.pool = pool
    h.running = True
    h.moved = True
    for s in h.slots:
        cy.holders[s].append(h.job_id)
    _moved(pol, cy, h.job_id)
    pol.counters["moves"] += 1


def _pool_moves(pol: GandivaFair, cy: Cycle, budget: int) -> int:
    """Move jobs between pools towards each user's entitlement split."""
    pools = cy.pools
    if len(pools) < 2 or budget <= 0:
        return 0
    used = 0
    by_user: dict[str, list[HeldJob]] = defaultdict(list)
    for h in cy.held.values():
        if h.pool != ANY_POOL and h.view.spec.gpu_type is None:
            by_user[h.user].append(h)
    for user in sorted(by_user):
        if used >= budget:
            break
        hs = by_user[user]
        ent = cy.entitlement.get(user, {})
        total_e = sum(ent.values())
        if total_e <= 0:
            continue
        d: dict[str, float] = defaultdict(float)
        for h in hs:
            d[h.pool] += h.size
        dem = sum(d.values())
        target = {g: dem * ent.get(g, 0.0) / total_e for g in pools}
        over = max(pools, key=lambda g: (d[g] - target[g], g))
        under = min(pools, key=lambda g: (d[g] - target[g], g))
        cands = sorted(
            (h for h in hs if h.pool == over and _movable(pol, cy, h)
             and pools[under] >= h.size),
            key=lambda h: (-h.size, pol.mem[h.job_id].seq),
        )
        for h in cands:
            before = abs(d[over] - target[over]) + abs(d[under] - target[under])
            after = (abs(d[over] - h.size - target[over])
                     + abs(d[under] + h.size - target[under]))
            if after >= before - EPS:
                continue
            nodes = servers(cy, under, h.view)
            t = ticket(cy, user, under, 1 + sum(1 for x in hs if x.pool == under))
            share = min(1.0, cy.lam.get(under, math.inf) * t / h.size)
            p = choose_gpus(pol, cy, nodes, h.size, share, exclude=h.job_id)
            if p is None:
                continue
            _move(pol, cy, h, p, under)
            used += 1
            break
    return used


def _to_free_gpus(pol: GandivaFair, cy: Cycle, budget: int) -> int:
    """Work conservation by migration: a time-sliced job (most behind first, wide gangs
    included) moves to GPUs nobody holds, when its pool has enough of them."""
    free = {n.name: n.num_gpus - sum(1 for g in range(n.num_gpus) if cy.holders.get(
        (n.name, g))) for n in cy.snap.cluster.nodes}
    if sum(free.values()) == 0:
        return 0
    sliced = [
        h for h in cy.held.values()
        if h.pool != ANY_POOL and _movable(pol, cy, h)
        and any(len(cy.holders.get(s, ())) > 1 for s in h.slots)
    ]
    sliced.sort(key=lambda h: (-pol.mem[h.job_id].lag, pol.mem[h.job_id].seq))
    used = 0
    for h in sliced:
        if used >= budget:
            break
        nodes = servers(cy, h.pool, h.view)
        if sum(free[n.name] for n in nodes) < h.size:
            continue
        p = choose_gpus(pol, cy, nodes, h.size, h.share, exclude=h.job_id, only_free=True)
        if p is None:
            continue
        for node, gpus in p.as_dict.items():
            free[node] -= len(gpus)
        _move(pol, cy, h, p, h.pool)
        used += 1
    return used


def _gpu_loads(cy: Cycle, pool: str) -> dict[Slot, float]:
    return {
        (n.name, g): cy.load((n.name, g))
        for n in cy.snap.cluster.nodes if n.gpu_type == pool
        for g in range(n.num_gpus)
    }


def _load_moves(pol: GandivaFair, cy: Cycle, budget: int) -> int:
    """When a pool's GPU load spread exceeds theta x the mean, move one job off one of its
    most loaded GPUs (the first, from the top, that has a move lowering its peak load by
    at least theta/2 x the mean), the job whose share is closest to half the spread."""
    used = 0
    for pool in sorted(cy.pools):
        if used >= budget:
            break
        loads = _gpu_loads(cy, pool)
        if not loads:
            continue
        mean = sum(loads.values()) / len(loads)
        lo = min(loads.values())
        top = sorted(loads, key=lambda s: (-loads[s], s))[:8]
        if mean <= 0 or loads[top[0]] - lo <= pol.theta * mean:
            continue
        margin = pol.theta * mean / 2
        moved = False
        for hi_slot in top:
            gap = loads[hi_slot] - lo
            if moved or gap <= pol.theta * mean:
                break
            cands = [
                cy.held[j] for j in cy.holders.get(hi_slot, ())
                if len(cy.held[j].servers) == 1 and _movable(pol, cy, cy.held[j])
            ]
            cands.sort(key=lambda h: (abs(h.share - gap / 2), pol.mem[h.job_id].seq))
            for h in cands:
                nodes = servers(cy, pool, h.view)
                p = choose_gpus(pol, cy, nodes, h.size, h.share, exclude=h.job_id)
                if p is None or frozenset(p.slots()) == h.slots:
                    continue
                new_peak = max(cy.load(s, h.job_id) for s in p.slots()) + h.share
                old_peak = max(loads[s] for s in h.slots)
                if new_peak < old_peak - margin:
                    _move(pol, cy, h, p, pool)
                    used += 1
                    moved = True
                    break
    return used


def _swaps(pol: GandivaFair, cy: Cycle, budget: int) -> int:
    """Swap a job that lags its fair share on a crowded GPU with a same-size job ahead of
    its share on a lighter GPU (lag = due - pass, in pass units)."""
    used = 0
    groups: dict[tuple[str, int], list[HeldJob]] = defaultdict(list)
    for h in cy.held.values():
        if (len(h.servers) == 1 and _movable(pol, cy, h)
                and pol.mem[h.job_id].pass_ is not None):
            groups[(h.pool, h.size)].append(h)
    candidates: list[tuple[float, str, HeldJob, list[HeldJob]]] = []
    for hs in groups.values():
        hs.sort(key=lambda h: (pol.mem[h.job_id].lag, h.job_id))  # most ahead first
        for h in hs[-8:]:
            candidates.append((-pol.mem[h.job_id].lag, h.job_id, h, hs))
    candidates.sort(key=lambda c: (c[0], c[1]))  # most behind first, over all sizes
    peak = {h.job_id: max(cy.load(s) for s in h.slots)
            for hs in groups.values() for h in hs}
    done: set[str] = set()
    for neg_lag, _, behind, group in candidates:
        if used + 2 > budget:
            break
        if behind.job_id in done:
            continue
        for ahead in group:
            if ahead.job_id in done or ahead is behind:
                continue
            stride = max(behind.size / behind.tickets, ahead.size / ahead.tickets)
            if -neg_lag - pol.mem[ahead.job_id].lag <= pol.swap_threshold_quanta * stride:
                break  # lags only get closer from here
            # The job behind must find a lighter place than it leaves, counting the swap.
            after = max(cy.load(s) - ahead.share + behind.share for s in ahead.slots)
            if after >= peak[behind.job_id] - 1e-6:
                continue
            _swap(pol, cy, behind, ahead)
            done.update((behind.job_id, ahead.job_id))
            used += 2
            break
    return used


def _swap(pol: GandivaFair, cy: Cycle, a: HeldJob, b: HeldJob) -> None:
    pa = Placement.of(_by_node(a.slots))
    pb = Placement.of(_by_node(b.slots))
    for h in (a, b):
        for s in h.slots:
            cy.holders[s].remove(h.job_id)
        cy.pre.append(Preempt(job_id=h.job_id, reason="gandiva-fair: pass swap"))
    for h, p in ((a, pb), (b, pa)):
        start_or_share(cy, h.job_id, p, p.slots(), "gandiva-fair: pass swap",
                             "gandiva-fair: swap")
        h.slots = frozenset(p.slots())
        h.servers = p.nodes
        h.running = True
        h.moved = True
        _moved(pol, cy, h.job_id)
    for h in (a, b):
        for s in h.slots:
            cy.holders[s].append(h.job_id)
    pol.counters["swaps"] += 1
    pol.counters["moves"] += 2


def _by_node(slots: frozenset[Slot]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for node, g in sorted(slots):
        out[node].append(g)
    return dict(out)
