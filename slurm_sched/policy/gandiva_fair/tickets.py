"""Gandiva_fair's tickets: users' tickets, GPU pools, per-pool entitlements (with trading) and
each held job's tickets and water-filled time share (:func:`shares`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING

from slurm_sched.model import ClusterSnapshot, JobSpec
from slurm_sched.perf.fairness import water_fill
from slurm_sched.perf.gpu_generations import generation_rank, resolve_job_type, speedup
from slurm_sched.policy.gandiva_fair.cycle import Cycle
from slurm_sched.policy.gandiva_fair.job_state import EPS, HeldJob
from slurm_sched.policy.gandiva_trading import base_entitlements, highest_lowest_trade, trade

if TYPE_CHECKING:
    from slurm_sched.policy.gandiva_fair.policy import GandivaFair

#: Trading rules: the incentive-compatible default and the spec's literal one (comparison).
TRADE_RULES = {"vickrey-pivot": trade, "highest-lowest": highest_lowest_trade}
#: Pool key of a job wider than every pool it may use (placed across pools).
ANY_POOL = "*"
#: Tickets (GPUs) of a job in a pool where its user is entitled to nothing: it only uses GPUs
#: nobody else wants at that moment.
_BACKGROUND_TICKETS = 1e-3


def _user_tickets(pol: GandivaFair, snap: ClusterSnapshot) -> dict[str, float]:
    out: dict[str, float] = {}
    for j in snap.jobs:
        u = j.spec.user
        if u in pol.tickets:
            out[u] = pol.tickets[u]
            continue
        hint = j.spec.attrs.get("tickets") if pol.use_job_tickets else None
        if isinstance(hint, (int, float)) and not isinstance(hint, bool) and hint > 0:
            out[u] = max(out.get(u, 0.0), float(hint))
        else:
            out.setdefault(u, 0.0)
    return {u: (t if t > 0 else pol.default_tickets) for u, t in out.items()}


def pool_sizes(snap: ClusterSnapshot) -> dict[str, int]:
    """GPUs per pool (GPU type)."""
    return {t: snap.cluster.gpus_of_type(t) for t in snap.cluster.gpu_types}


def _user_types(pol: GandivaFair, snap: ClusterSnapshot) -> dict[str, str]:
    first: dict[str, tuple[int, str]] = {}
    for j in snap.jobs:
        seq = pol.mem[j.spec.job_id].seq
        u = j.spec.user
        if u not in first or seq < first[u][0]:
            first[u] = (seq, job_type(pol, j.spec))
    return {u: jt for u, (_, jt) in first.items()}


def speed(pol: GandivaFair, job_type: str, pool: str) -> float:
    """The speed-up of ``job_type`` on ``pool``'s GPUs over the reference GPU (memoised)."""
    got = pol.speeds.get((job_type, pool))
    if got is None:
        got = pol.speeds[(job_type, pool)] = speedup(job_type, pool, pol.speedup_reference)
    return got


def job_type(pol: GandivaFair, spec: JobSpec) -> str:
    """:func:`job_type_of`, memoised by its inputs (the type name and batch size)."""
    declared = spec.attrs.get("job_type")
    name = declared if isinstance(declared, str) and declared else spec.model
    key = (name, spec.batch_size)
    got = pol.job_types.get(key)
    if got is None:
        if len(pol.job_types) > 4096:
            pol.job_types.clear()
        got = pol.job_types[key] = resolve_job_type(name, spec.batch_size)
    return got


def entitle(pol: GandivaFair, cy: Cycle) -> None:
    """Base entitlements, then trading among saturated users (cached)."""
    snap = cy.snap
    cy.user_tickets = _user_tickets(pol, snap)
    pools = pool_sizes(snap)
    base = base_entitlements(pools, cy.user_tickets)
    if not pol.trading or len(pools) < 2:
        cy.entitlement = base
        pol.trade_result = (base, [])
        return
    demand: dict[str, int] = defaultdict(int)
    for j in snap.jobs:
        demand[j.spec.user] += j.spec.num_gpus
    types = _user_types(pol, snap)
    saturated = sorted(
        u for u in base if demand[u] >= sum(base[u].values()) - EPS
    )
    key = (
        tuple(sorted(cy.user_tickets.items())),
        tuple(sorted(pools.items())),
        tuple((u, types[u]) for u in saturated),
    )
    if key != pol.trade_key:
        speeds = {u: {g: speed(pol, types[u], g) for g in pools} for u in saturated}
        rule = TRADE_RULES[pol.trade_rule]
        pol.trade_result = rule(base, speeds, generation_rank(list(pools)))
        pol.trade_key = key
        pol.counters["trade_rounds"] += 1
    cy.entitlement = pol.trade_result[0]


def shares(cy: Cycle) -> None:
    """Job tickets (user entitlement split over its jobs per pool) and water-filled time
    shares per pool."""
    if cy.shares_at == cy.version:
        return
    cy.shares_at = cy.version
    groups: dict[tuple[str, str], list[HeldJob]] = defaultdict(list)
    for h in cy.held.values():
        groups[(h.user, h.pool)].append(h)
    for (user, pool), hs in groups.items():
        # Equal split of the user's entitlement, a job narrower than its part passing the
        # rest to the user's other jobs first (water-filling inside the user).
        split = water_fill({h.job_id: float(h.size) for h in hs},
                           {h.job_id: 1.0 for h in hs}, ticket(cy, user, pool, 1))
        for h in hs:
            h.tickets = max(split[h.job_id], _BACKGROUND_TICKETS / len(hs))
    by_pool: dict[str, list[HeldJob]] = defaultdict(list)
    for h in cy.held.values():
        by_pool[h.pool].append(h)
    pools = cy.pools
    for pool, hs in by_pool.items():
        cap = sum(pools.values()) if pool == ANY_POOL else pools.get(pool, 0)
        x = water_fill({h.job_id: float(h.size) for h in hs},
                       {h.job_id: h.tickets for h in hs}, float(cap))
        lam = math.inf
        for h in hs:
            h.share = min(1.0, x[h.job_id] / h.size)
            if not h.capped:
                lam = min(lam, x[h.job_id] / h.tickets)
        cy.lam[pool] = lam


def ticket(cy: Cycle, user: str, pool: str, n: int) -> float:
    """Tickets of one of the user's ``n`` jobs in ``pool``: its entitlement there (all pools
    for :data:`ANY_POOL`, at least the background tickets) split equally."""
    ent = cy.entitlement.get(user, {})
    e = sum(ent.values()) if pool == ANY_POOL else ent.get(pool, 0.0)
    return max(e, _BACKGROUND_TICKETS) / max(1, n)
