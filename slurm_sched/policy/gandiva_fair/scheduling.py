"""Gandiva_fair's split stride scheduling: fair-share passes (:func:`accrue`), passes for
jobs that have none (adoption), the jobs to run this quantum (:func:`schedule`) and the
Suspend/Resume actions that make it so (:func:`emit`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from typing import TYPE_CHECKING

from slurm_sched.model import Action, Resume, Suspend
from slurm_sched.policy.gandiva_fair.cycle import Cycle
from slurm_sched.policy.gandiva_fair.job_state import HeldJob
from slurm_sched.policy.gandiva_fair.placement import join_pass
from slurm_sched.policy.gandiva_stride import (
    PASS_DIGITS,
    Slot,
    StrideClient,
    slot_stride_round,
    sort_key,
)

if TYPE_CHECKING:
    from slurm_sched.policy.gandiva_fair.policy import GandivaFair

#: A pool's positions, tickets and tickets x pass of its uncapped jobs, then of all its jobs.
_PoolLists = tuple[list[float], list[float], list[float], list[float], list[float], list[float]]


def accrue(pol: GandivaFair, cy: Cycle) -> None:
    """Advance every held job's fair-share pass by one quantum of its water-filled GPUs."""
    for h in cy.held.values():
        mem = pol.mem[h.job_id]
        if mem.pass_ is not None:
            mem.due += h.share * h.size / h.tickets


def _client(pol: GandivaFair, h: HeldJob) -> StrideClient:
    mem = pol.mem[h.job_id]
    return StrideClient(h.job_id, h.size, h.tickets, pass_=mem.pass_ or 0.0,
                        last_run=mem.last_run, seq=mem.seq, slots=h.slots)


def _store(pol: GandivaFair, c: StrideClient) -> None:
    mem = pol.mem[c.key]
    mem.pass_ = c.pass_
    mem.last_run = c.last_run


def schedule(pol: GandivaFair, cy: Cycle, boundary: bool) -> set[str]:
    """The jobs to run from now on (:mod:`.policy` docstring: split stride)."""
    _adopt(pol, cy)
    q = pol.quantum
    if not boundary:
        keep = {
            j for j, h in cy.held.items()
            if h.running and j not in cy.newly_running and not h.moved
        }
        busy = {s for j in keep for s in cy.held[j].slots}
        rest = [_client(pol, h) for j, h in cy.held.items() if j not in keep]
        left = max(0.0, (pol.next_quantum_s or cy.now) - cy.now) / pol.quantum_s
        chosen = slot_stride_round(rest, q, busy, fraction=min(1.0, left))
        for c in chosen:
            _store(pol, c)
        return keep | {c.key for c in chosen}
    large = [h for h in cy.held.values() if len(h.servers) > 1]
    local: dict[str, list[HeldJob]] = defaultdict(list)
    for h in cy.held.values():
        if len(h.servers) == 1:
            local[h.servers[0]].append(h)
    claimed: set[Slot] = set()
    run: set[str] = set()
    if large:
        # Central layer: a wide job runs when it is at least as far behind its fair share
        # (lag = due - pass) as the local jobs it displaces on each of its servers are on
        # average (ticket-weighted): the aggregate client of each server, compared by lag.
        clients = sorted((_client(pol, h) for h in large),
                         key=lambda c: (-round(pol.mem[c.key].lag, PASS_DIGITS),
                                        c.last_run, c.seq))
        for c in clients:
            if not claimed.isdisjoint(c.slots):
                continue
            lag = round(pol.mem[c.key].lag, PASS_DIGITS)
            blocked = False
            for server in cy.held[c.key].servers:
                rivals = [h for h in local.get(server, ()) if not c.slots.isdisjoint(h.slots)]
                den = sum(h.tickets for h in rivals)
                if den <= 0:
                    continue
                mean = sum(h.tickets * pol.mem[h.job_id].lag for h in rivals) / den
                if lag < round(mean, PASS_DIGITS):
                    blocked = True
                    break
            if blocked:
                continue
            c.charge(q)
            _store(pol, c)
            claimed.update(c.slots)
            run.add(c.key)
    for server in sorted(local):
        chosen = slot_stride_round([_client(pol, h) for h in local[server]], q, claimed)
        for c in chosen:
            _store(pol, c)
            run.add(c.key)
    # Work conservation: a central job whose GPUs nobody took this quantum runs too.
    for c in sorted((_client(pol, h) for h in large if h.job_id not in run), key=sort_key):
        if claimed.isdisjoint(c.slots):
            c.charge(q)
            _store(pol, c)
            claimed.update(c.slots)
            run.add(c.key)
    return run


def _adopt(pol: GandivaFair, cy: Cycle) -> None:
    """Jobs without a pass (policy restarted, or placed elsewhere) join their pool's
    virtual time (:func:`.placement.join_pass`), in ``held`` order.

    Many at once (a restart under thousands of jobs): each pool's jobs with a pass are kept
    in ``held`` order as lists of tickets and tickets x pass, so each join sums those lists
    (the same sums in the same order) instead of filtering every held job."""
    adopted = [h for h in cy.held.values() if pol.mem[h.job_id].pass_ is None]
    if len(adopted) < 2:
        for h in adopted:
            mem = pol.mem[h.job_id]
            mem.pass_ = mem.due = join_pass(pol, cy, h.pool)
        return
    where = {j: i for i, j in enumerate(cy.held)}
    # pool -> per list (uncapped jobs at 0, all at 3): jobs, terms tickets x pass that are
    # not 0.0, tickets that are not > 0. With jobs and none of the others the sums need
    # not be taken: sum(weighted) is 0.0 and sum(tickets) > 0, so the pool's virtual time
    # is 0.0 (a restart: every job placed so far joined an empty pool at 0).
    stats: dict[str, list[int]] = {}
    # pool -> positions, tickets, tickets x pass of uncapped jobs (0-2), then all (3-5);
    # built when a pool's sums must be taken, then kept up to date
    lists: dict[str, _PoolLists] = {}

    def add(h: HeldJob) -> None:
        w = h.tickets * (pol.mem[h.job_id].pass_ or 0.0)
        st = stats.setdefault(h.pool, [0, 0, 0, 0, 0, 0])
        ls = lists.get(h.pool)
        i = where[h.job_id]
        for at in ((0, 3) if not h.capped else (3,)):
            st[at] += 1
            st[at + 1] += w != 0.0
            st[at + 2] += not h.tickets > 0
            if ls is not None:
                k = bisect_left(ls[at], i)
                ls[at].insert(k, i)
                ls[at + 1].insert(k, h.tickets)
                ls[at + 2].insert(k, w)

    def build(pool: str) -> _PoolLists:
        ls: _PoolLists = ([], [], [], [], [], [])
        for i, h in enumerate(cy.held.values()):
            pass_ = pol.mem[h.job_id].pass_
            if h.pool != pool or pass_ is None:
                continue
            for at in ((0, 3) if not h.capped else (3,)):
                ls[at].append(i)
                ls[at + 1].append(h.tickets)
                ls[at + 2].append(h.tickets * (pass_ or 0.0))
        lists[pool] = ls
        return ls

    for h in cy.held.values():
        if pol.mem[h.job_id].pass_ is not None:
            add(h)
    for h in adopted:
        st = stats.get(h.pool, [0, 0, 0, 0, 0, 0])
        at = 0 if st[0] else 3
        if st[at] and st[at + 1] == 0 and st[at + 2] == 0:
            pol.pool_vt[h.pool] = 0.0  # = sum(weighted) / sum(tickets)
        else:
            ls = lists.get(h.pool) or build(h.pool)
            den = sum(ls[at + 1])
            if den > 0:
                pol.pool_vt[h.pool] = sum(ls[at + 2]) / den
        mem = pol.mem[h.job_id]
        mem.pass_ = mem.due = pol.pool_vt.get(h.pool, 0.0)
        add(h)


def emit(pol: GandivaFair, cy: Cycle, run: set[str]) -> list[Action]:
    """The cycle's moves and placements, then a Suspend for each held job that runs and is not
    in ``run``, then a Resume for each job in ``run`` that does not run."""
    actions: list[Action] = list(cy.pre)
    resumes: list[Action] = []
    for j, h in cy.held.items():
        running_now = h.running or j in cy.newly_running
        if j in run and not running_now:
            resumes.append(Resume(job_id=j, reason="gandiva-fair: its stride turn"))
        elif j not in run and running_now:
            actions.append(Suspend(job_id=j, reason="gandiva-fair: quantum over"))
            pol.counters["suspends"] += 1
    pol.counters["resumes"] += len(resumes)
    return actions + resumes
