"""Themis: finish-time fairness, as the Muri evaluation runs it (a baseline of Muri).

Paper: Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI'20. This is
the Gavel-style simulation of it in the Muri artifact (``themis_sim_jobs``), spec
``shared/specs/muri.md`` section 3. At every event, for every active job i:

- isolated share ``alloc_i = min(1, ceil(G / N) / g_i)`` (1/N of the cluster, G GPUs, N jobs);
- finish-time fairness of a time fraction ``x_i`` in [0, 1]:
  ``rho_i(x) = (now - submit_i + rem_i / x) / (cum_i + rem_i / alloc_i)`` with ``rem_i`` the
  remaining isolated time and ``cum_i`` the isolated-share time of the work done so far
  (accumulated event by event as ``delta work / alloc``);
- ``x`` minimises ``max_i rho_i`` subject to ``sum_i g_i x_i <= G``. Each ``rho_i`` falls with
  ``x_i``, so the optimum is found exactly by bisection on the common level ``t``: the least
  ``x_i(t) = rem_i / (t * D_i - age_i)`` reaching it, with ``t`` the smallest level whose
  ``sum g_i x_i(t)`` fits. (The artifact solves the same min-max with cvxpy/ECOS; its optimum
  is not unique for jobs below the max, and we take the least allocation that reaches it.)
- Order: ``x_i / executed_i`` descending (``x_i * 1e9`` for a job that never ran), ties by the
  deficit ``time it should have received - executed``, by ``x_i``, then by submit time and
  arrival order; the jobs that fit by GPU count run, the others are preempted
  (``preemptive_in_order``, consolidated placement).

It knows each job's remaining iterations, so it is clairvoyant (spec AMBIGUITY: the paper lists
it among the duration-unaware baselines). ``artifact_iso_bug=True`` reproduces the artifact's
isolated-throughput bug (Muri issue #3: the share is not multiplied by the job's throughput),
which scales job i's ``rho_i`` by its iteration time in seconds.

Options (defaults = the spec's reading; each changes one rule, for cross-checks against the
artifact's published averages, ``benchmarks/crosscheck.py --policies themis -o KEY=VALUE``):

- ``never_run``: ``"spec"`` (``x * 1e9``, a job that never ran outranks every job that
  has), ``"executed1"`` (executed time floored at 1 s, see :func:`rank_value`) or ``"stale"``
  (the "spec" rule on the executed time as of the previous plan, so a job started at the last
  plan still counts as never run);
- ``order_by``: ``"rounds"`` (spec: ``x / executed``), ``"x"`` (the allocation alone) or
  ``"age"`` (``x / (now - submit)``);
- ``lease_s``: a running job keeps its GPUs until it has run ``lease_s`` since its (re)start
  (0 = the spec: every plan may preempt it);
- ``optimum``: which point of a non-unique min-max optimum is used, ``"least"`` (the least
  allocation reaching the level) or ``"centre"`` (the analytic centre of the optimal face;
  :func:`centre_allocation`);
- ``allocator`` (programmatic only): the min-max solver, :func:`min_max_allocation` by default.
  ``benchmarks/themis_solver.py`` passes the artifact's own one (cvxpy with ECOS) to measure
  how much its published numbers depend on the point its solver picks.

Like the artifact it re-plans at arrivals and completions only (``EventGate``): its priority
(rounds received per executed second) crosses continuously, and re-planning at every other
wake-up would swap jobs back and forth. Deviations: GPU counting and in-place running jobs
instead of the artifact's YARN re-placement of every job at every event.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from slurm_sched.model import Action, ClusterSnapshot, JobState
from slurm_sched.policy.base import Policy
from slurm_sched.policy.muri import EventGate
from slurm_sched.policy.placement import pack_consolidated
from slurm_sched.policy.queue_based import preemptive_in_order


def min_max_allocation(
    gpus: np.ndarray,
    age_s: np.ndarray,
    rem_s: np.ndarray,
    denom_s: np.ndarray,
    capacity: float,
) -> np.ndarray:
    """The least x in [0, 1]^n reaching ``min_x max_i (age_i + rem_i / x_i) / denom_i``
    subject to ``sum_i gpus_i * x_i <= capacity`` (every ``denom_i`` > 0)."""
    active = rem_s > 0
    if not active.any():
        return np.zeros_like(rem_s)

    def alloc(t: float) -> np.ndarray:
        room = t * denom_s - age_s
        x = np.ones_like(rem_s)
        np.divide(rem_s, room, out=x, where=active & (room > 0))
        x[~active] = 0.0
        return np.asarray(np.minimum(x, 1.0), dtype=float)

    # Every job at x = 1 gives the lowest level any allocation can reach.
    lo = float(np.max(((age_s + rem_s) / denom_s)[active]))
    if float(gpus @ alloc(lo)) <= capacity:
        return alloc(lo)
    hi = max(lo * 2.0, lo + 1.0)
    while float(gpus @ alloc(hi)) > capacity:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(gpus @ alloc(mid)) > capacity:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return alloc(hi)


#: A min-max allocation solver: ``(gpus, age_s, rem_s, denom_s, capacity) -> x``, the contract of
#: :func:`min_max_allocation` (any point of the optimal set).
Allocator = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]


def rank_value(x: float, executed_s: float, never_run: str = "spec",
               order_by: str = "rounds", age_s: float = 0.0) -> float:
    """A job's priority (higher runs first) from its allocation ``x`` and executed seconds.

    ``order_by="rounds"`` (spec section 3): ``x / executed``. A job that never ran gets
    ``x * 1e9`` with ``never_run="spec"`` (spec), so it ranks above every job that has run;
    with ``never_run="executed1"`` its executed time counts as 1 s (and so does any shorter
    one), so it competes on ``x`` with the running jobs. ``order_by="x"``: ``x`` alone;
    ``order_by="age"``: ``x / age`` (the time since submission in place of the executed time,
    pending included; the never-run rule applies to a job of age 0).
    """
    if order_by == "x":
        return x
    if order_by == "age":
        executed_s = age_s
    if never_run == "executed1":
        return x / max(executed_s, 1.0)
    return x * 1e9 if executed_s <= 0 else x / executed_s


def centre_allocation(
    gpus: np.ndarray, least: np.ndarray, capacity: float
) -> np.ndarray:
    """The analytic centre of ``{least_i <= x_i <= 1, sum_i gpus_i x_i <= capacity}``: the
    point maximising ``sum_i [log(x_i - least_i) + log(1 - x_i)] + log(capacity - sum g x)``
    over the jobs with ``least_i < 1`` (a job with ``least_i`` = 0 or 1 keeps it).

    This is where a primal-dual interior-point solver (the artifact's cvxpy/ECOS) ends when the
    min-max optimum is not unique: inside the optimal face, not at its lowest corner. When
    ``least`` already fills the capacity the face is the point ``least`` and it is returned.
    """
    free = (least > 0) & (least < 1)
    room = capacity - float(gpus @ least)
    if not free.any() or room <= 1e-9 * max(capacity, 1.0):
        return least.copy()
    m = least[free]
    g = gpus[free]
    w = 1.0 - m

    def x_at(mu: float) -> np.ndarray:
        # stationarity per job: 1/(x - m) - 1/(1 - x) = g * mu; the root with x - m <= w / 2
        c = g * mu
        b = c * w + 2.0
        a = np.where(c > 1e-15, (b - np.sqrt(np.maximum(b * b - 4.0 * c * w, 0.0)))
                     / np.maximum(2.0 * c, 1e-300), w / 2.0)
        return m + a

    base = float(gpus[~free] @ least[~free])

    def h(mu: float) -> float:
        return mu * (capacity - base - float(g @ x_at(mu))) - 1.0

    lo, hi = 0.0, 1.0
    while h(hi) < 0:
        hi *= 2.0
        if hi > 1e300:
            break
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if h(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    out = least.copy()
    out[free] = x_at(hi)
    return out


class Themis(Policy):
    name = "themis"
    paper = "Mahajan et al., NSDI'20 (finish-time fairness), as simulated by Muri"
    summary = "finish-time-fairness min-max allocation, rounds to the furthest-behind jobs"
    clairvoyant = True

    def __init__(
        self,
        artifact_iso_bug: bool = False,
        never_run: str = "spec",
        lease_s: float = 0.0,
        order_by: str = "rounds",
        optimum: str = "least",
        allocator: Allocator | None = None,
    ) -> None:
        if optimum not in ("least", "centre"):
            raise ValueError(f"optimum must be 'least' or 'centre', got {optimum!r}")
        self.optimum = optimum
        self.allocator = allocator or min_max_allocation
        if never_run not in ("spec", "executed1", "stale"):
            raise ValueError(
                f"never_run must be 'spec', 'executed1' or 'stale', got {never_run!r}")
        if order_by not in ("rounds", "x", "age"):
            raise ValueError(f"order_by must be 'rounds', 'x' or 'age', got {order_by!r}")
        if lease_s < 0:
            raise ValueError(f"lease_s must be >= 0, got {lease_s}")
        self.artifact_iso_bug = artifact_iso_bug
        self.never_run = never_run
        self.lease_s = float(lease_s)
        self.order_by = order_by
        # start of each running job's current run, as seen at plans (for the lease)
        self._run_since: dict[str, float] = {}
        # executed seconds as of the previous plan (never_run="stale")
        self._exec_prev: dict[str, float] = {}
        self.gate = EventGate()
        # Learned state per job: isolated time of the work done, work at the last event, its
        # isolated share then, time it should have received.
        self._cum_iso_s: dict[str, float] = {}
        self._last_work_s: dict[str, float] = {}
        self._last_alloc: dict[str, float] = {}
        self._should_s: dict[str, float] = {}
        self._last_event_s: float | None = None

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        if not self.gate.due(snapshot, now_s):
            return []  # the artifact re-plans at arrivals and completions only
        self.gate.planning(snapshot, now_s)
        jobs = snapshot.jobs
        if not jobs:
            self._last_event_s = now_s
            return []
        n = len(jobs)
        total = snapshot.cluster.total_gpus
        share = math.ceil(total / n)
        gpus = np.array([j.spec.num_gpus for j in jobs], dtype=float)
        alloc = np.minimum(1.0, share / gpus)
        age = np.empty(n)
        rem = np.empty(n)
        denom = np.empty(n)
        scale = np.ones(n)
        for i, j in enumerate(jobs):
            jid = j.spec.job_id
            work = j.work_done_at(now_s)
            prev = self._last_work_s.get(jid)
            cum = self._cum_iso_s.get(jid, 0.0)
            if prev is not None:
                cum += (work - prev) / self._last_alloc[jid]
            self._cum_iso_s[jid] = cum
            self._last_work_s[jid] = work
            self._last_alloc[jid] = float(alloc[i])
            age[i] = now_s - j.spec.submit_time_s
            rem[i] = j.remaining_s(now_s)
            denom[i] = cum + rem[i] / alloc[i]
            if self.artifact_iso_bug and j.spec.iteration_time_s:
                scale[i] = j.spec.iteration_time_s
        denom = np.maximum(denom / scale, 1e-12)
        x = self.allocator(gpus, age, rem, denom, float(total))
        if self.optimum == "centre":
            x = centre_allocation(gpus, x, float(total))
        elapsed = 0.0 if self._last_event_s is None else now_s - self._last_event_s
        self._last_event_s = now_s
        keyed = []
        for i, j in enumerate(jobs):
            jid = j.spec.job_id
            executed = j.executed_at(now_s)
            should = self._should_s.get(jid, 0.0)
            deficit = should - executed
            self._should_s[jid] = should + float(x[i]) * elapsed
            xi = float(x[i])
            if self.never_run == "stale":
                seen = self._exec_prev.get(jid, 0.0)
                self._exec_prev[jid] = executed
                val = rank_value(xi, seen, "spec", self.order_by, float(age[i]))
            else:
                val = rank_value(xi, executed, self.never_run, self.order_by, float(age[i]))
            leased = 0
            if j.state is not JobState.PENDING:
                since = self._run_since.setdefault(jid, now_s)
                leased = -1 if now_s < since + self.lease_s - 1e-9 else 0
            else:
                self._run_since.pop(jid, None)
            # last tie-break: arrival order (the snapshot's), not the id as a string
            keyed.append((leased, -val, -deficit, -xi, j.spec.submit_time_s, i, j))
        self._forget(snapshot)
        if not snapshot.pending:
            return []
        keyed.sort(key=lambda k: k[:6])
        order = [k[6] for k in keyed]
        actions = preemptive_in_order(
            snapshot, order, packer=pack_consolidated, reason="themis: furthest from fair share"
        )
        for a in actions:
            if a.kind == "start":
                self._run_since[a.job_id] = now_s
        self.gate.expect(actions)
        return actions

    def _forget(self, snapshot: ClusterSnapshot) -> None:
        if len(self._cum_iso_s) > 2 * len(snapshot.jobs) + 1024:
            active = snapshot.by_id
            for d in (self._cum_iso_s, self._last_work_s, self._last_alloc, self._should_s,
                      self._run_since, self._exec_prev):
                for jid in [k for k in d if k not in active]:
                    del d[jid]

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        base = super().explain(snapshot, job_id)
        job = snapshot.by_id.get(job_id)
        if job is None or job.state is not JobState.PENDING:
            return base
        return (f"{base}; executed {job.executed_at(snapshot.now_s):.0f} s, "
                f"should have received {self._should_s.get(job_id, 0.0):.0f} s")


POLICIES = [Themis]
