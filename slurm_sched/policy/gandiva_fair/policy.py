"""Gandiva_fair: ticket-based fair share of cluster-wide GPU time across GPU generations.

Paper: S. Chaudhary, R. Ramjee, M. Sivathanu, N. Kwatra, S. Viswanatha, "Balancing Efficiency
and Fairness in Heterogeneous GPU Clusters for Deep Learning", EuroSys 2020
(doi:10.1145/3342195.3387555). Implemented from the slide deck and the project spec
``specs/gandiva-fair.md`` (the paper itself was not available).

What it does
------------
- **Users and tickets.** A job's user is ``JobSpec.user`` (on Slurm: the account). A user's
  tickets ``T_u`` come from the ``tickets`` mapping given to the constructor; a user it does not
  list takes the largest ``attrs["tickets"]`` hint among its active jobs (unless
  ``use_job_tickets=False``), else ``default_tickets``. Each GPU pool (one per GPU type) is owed
  to the active users in ticket proportion: user u is *entitled* to ``e[u][g] = G_g * T_u /
  sum T`` GPUs of pool g, changed by trading (below). Inside a pool, ``e[u][g]`` is split
  equally among the user's jobs there, ``t_j = e[u][g] / n[u][g]``, except that a job narrower
  than its part passes the rest to the user's other jobs (water-filling inside the user), so
  tickets are in GPUs and a user with mixed job widths can use its whole entitlement.
- **Time slicing.** Up to :attr:`max_jobs_per_gpu` jobs hold a GPU (``Start`` / ``Share``); each
  quantum (``quantum_s``, a ``next_wakeup_s`` timer) the policy decides which of them run and
  ``Suspend`` s / ``Resume`` s the others. A job keeps its GPUs while suspended (Slurm semantics),
  so the stride rounds use the fixed-slot fit rule of :mod:`gandiva_stride`.
- **Split stride.** Jobs within one server are scheduled by that server's gang-aware stride.
  Jobs wider than a server are scheduled first, centrally: most-behind first, such a job runs
  when its GPUs are not taken by an earlier one and it is at least as far behind its fair share
  as the local jobs it would displace on each of its servers are on average (ticket-weighted
  ``due - pass``, see pass swaps below): that average plays the spec's per-server aggregate
  client. Free GPUs are then filled by any job whose GPUs are all free (work conservation).
  Between quanta, GPUs freed by a completion are filled the same way, charging the rest of the
  quantum.
- **Placement.** A new job goes to the pool where it gets most: ``r[u][g] * min(1, e[u][g] /
  (d[u][g] + size))`` (``d``: the user's GPUs already in g), i.e. the fastest pool for its type
  while the user is under its entitlement there ("fastest GPU subject to contention"); a pool
  with idle room counts at full speed. In the pool, it takes the server and GPUs that minimise
  the resulting GPU load, where a GPU's load is the sum of the time shares (water-filled
  ``min(1, lambda * t_j / size_j)``) of the jobs holding it, so 1.0 = fully used.
- **Load balancing by migration** (once per quantum, at most ``max_moves_per_round`` moves, each
  job only after ``min_residence_s`` on its GPUs, doubled (up to 16x) after each move that
  left it further behind its fair share): (1) a user's jobs that sit in a pool beyond its
  share of the user's entitlement move to the pool that lacks them; (2) a time-sliced job (wide
  gangs included, most behind first) moves to GPUs nobody holds when there are enough of them
  (work conservation); (3) a job leaves the most loaded GPU when the GPU load spread exceeds
  ``theta`` x the mean and the move lowers the peak; (4) *pass swaps*: integer job counts
  cannot balance every GPU (70 jobs on 48 GPUs leave some GPUs with one job and some with two),
  so each job also keeps a *due* pass that grows by its water-filled fair share each quantum;
  when a job on a crowded GPU lags its due pass (``due - pass``) by more than a same-size job
  on a lighter GPU does, by over ``swap_threshold_quanta`` quanta of service, the two swap
  GPUs. Moves use ``Migrate`` to free GPUs, else ``Preempt`` + ``Share``/``Start``.
- **Heterogeneity and trading.** Speed-ups per job type and generation come from
  :mod:`slurm_sched.perf.gpu_generations` (a user's type = the type of its earliest active job;
  "transparent profiling" is assumed exact). With ``trading=True`` the users whose demand covers
  their entitlement trade entitlements by :func:`gandiva_trading.trade` (second-price auction per
  pool pair), recomputed when the set of users, their tickets, types or saturation changes
  (``trade_rule="highest-lowest"`` uses the spec's literal rule instead, for comparison).

Deviations (see ``docs/reproductions/gandiva-fair.md``)
-------------------------------------------------------
- Fixed GPU slots (a suspended Slurm job keeps its GPUs) instead of picking any free GPUs of a
  server each quantum; long-run fairness across GPUs is restored by the pass swaps, which the
  slides do not have, and a move costs a restart.
- The central layer compares how far behind their fair share jobs are (``due - pass``) rather
  than raw passes: a server's mean pass lags whenever its jobs are capped by their width, which
  starved wide jobs (Philly run: their virtual clusters got 0.84 of their fair share).
- Load is measured per GPU with water-filled time shares (demand caps included) instead of the
  spec's tickets per GPU, which ignores jobs that cannot use their share.
- The trading mechanism is the incentive-compatible variant of :mod:`gandiva_trading`.
- Jobs beyond the sharing capacity wait; they are admitted in the order of their user's held
  GPUs per ticket, then arrival.
- A job wider than any pool (no type constraint) is placed across pools and scheduled centrally.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping

from slurm_sched.model import (
    Action,
    ClusterSnapshot,
    JobSpec,
    JobState,
    JobView,
    Migrate,
    Node,
    Placement,
    Preempt,
    Resume,
    Share,
    Start,
    Suspend,
)
from slurm_sched.perf.fairness import water_fill
from slurm_sched.perf.gpu_generations import generation_rank, resolve_job_type, speedup
from slurm_sched.policy.base import Policy
from slurm_sched.policy.gandiva_fair.admission import AdmitCache, PickIndex, WideIndex
from slurm_sched.policy.gandiva_fair.cycle import Cycle
from slurm_sched.policy.gandiva_fair.job_state import EPS, HeldJob, JobMemory
from slurm_sched.policy.gandiva_stride import (
    PASS_DIGITS,
    Slot,
    StrideClient,
    slot_stride_round,
    sort_key,
)
from slurm_sched.policy.gandiva_trading import Trade, base_entitlements, highest_lowest_trade, trade

#: Trading rules: the incentive-compatible default and the spec's literal one (comparison).
TRADE_RULES = {"vickrey-pivot": trade, "highest-lowest": highest_lowest_trade}
#: Pool key of a job wider than every pool it may use (placed across pools).
ANY_POOL = "*"
#: Tickets (GPUs) of a job in a pool where its user is entitled to nothing: it only uses GPUs
#: nobody else wants at that moment.
_BACKGROUND_TICKETS = 1e-3


class GandivaFair(Policy):
    """Gandiva_fair (module docstring)."""

    name = "gandiva-fair"
    paper = (
        "Chaudhary et al., Balancing Efficiency and Fairness in Heterogeneous GPU Clusters "
        "for Deep Learning, EuroSys 2020"
    )
    summary = (
        "user tickets; gang-aware split-stride time slicing (suspend/resume), migration load "
        "balancing, fastest-GPU placement and second-price GPU trading"
    )
    shares_gpus = True
    #: Time-sliced jobs per GPU (suspended jobs keep GPU memory, so C is small). The experiments
    #: use 4. A Slurm cluster with S shards per GPU supports C < S / 2 + 1 (2 with the mini
    #: cluster's 4 shards, ``docs/slurm-backend.md``): pass ``max_jobs_per_gpu`` to match it.
    max_jobs_per_gpu = 4
    progress_model = "gpu-generations"

    def __init__(
        self,
        tickets: Mapping[str, float] | None = None,
        *,
        trading: bool = True,
        quantum_s: float = 60.0,
        default_tickets: float = 1.0,
        use_job_tickets: bool = True,
        theta: float = 0.1,
        max_moves_per_round: int = 4,
        min_residence_s: float = 600.0,
        swap_threshold_quanta: float = 16.0,
        speedup_reference: str = "k80",
        trade_rule: str = "vickrey-pivot",
        max_jobs_per_gpu: int | None = None,
    ) -> None:
        for user, t in (tickets or {}).items():
            if not t > 0:
                raise ValueError(f"tickets[{user!r}] must be > 0, got {t}")
        checks: dict[str, tuple[float | None, bool]] = {
            "quantum_s": (quantum_s, quantum_s > 0),
            "default_tickets": (default_tickets, default_tickets > 0),
            "theta": (theta, theta >= 0),
            "max_moves_per_round": (max_moves_per_round, max_moves_per_round >= 0),
            "min_residence_s": (min_residence_s, min_residence_s >= 0),
            "swap_threshold_quanta": (swap_threshold_quanta, swap_threshold_quanta > 0),
            "max_jobs_per_gpu": (
                max_jobs_per_gpu, max_jobs_per_gpu is None or max_jobs_per_gpu >= 1
            ),
        }
        for field_name, (value, ok) in checks.items():
            if not ok:
                raise ValueError(f"{field_name} out of range: {value!r}")
        if trade_rule not in TRADE_RULES:
            raise ValueError(f"trade_rule must be one of {sorted(TRADE_RULES)}, got {trade_rule!r}")
        self.tickets = dict(tickets or {})
        self.trading = trading
        self.quantum_s = quantum_s
        self.default_tickets = default_tickets
        self.use_job_tickets = use_job_tickets
        self.theta = theta
        self.max_moves_per_round = max_moves_per_round
        self.min_residence_s = min_residence_s
        self.swap_threshold_quanta = swap_threshold_quanta
        self.speedup_reference = speedup_reference
        self.trade_rule = trade_rule
        if max_jobs_per_gpu is not None:
            # this instance's capacity (the backend's C); the class default stays 4
            setattr(self, "max_jobs_per_gpu", max_jobs_per_gpu)  # noqa: B010
        self._mem: dict[str, JobMemory] = {}
        self._seq = 0
        self._quantum = 0
        self._next_quantum_s: float | None = None
        self._pool_vt: dict[str, float] = {}
        #: Memo of pure lookups: speed-ups by (job type, pool), job types by (name, batch)
        self._speeds: dict[tuple[str, str], float] = {}
        self._job_types: dict[tuple[str | None, int | None], str] = {}
        self._trade_key: tuple | None = None
        self._trade_result: tuple[dict[str, dict[str, float]], list[Trade]] = ({}, [])
        #: Overhead counters (suspends, resumes, moves, swaps, trade rounds).
        self.counters: dict[str, int] = defaultdict(int)

    # ------------------------------------------------------------------ public
    @property
    def last_trades(self) -> list[Trade]:
        return list(self._trade_result[1])

    @property
    def last_entitlements(self) -> dict[str, dict[str, float]]:
        return {u: dict(e) for u, e in self._trade_result[0].items()}

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        cy = self._sync(snapshot, now_s)
        if not snapshot.jobs or not snapshot.cluster.total_gpus:
            self._next_quantum_s = None
            return []
        self._entitle(cy)
        self._shares(cy)
        self._admit(cy)
        boundary = self._next_quantum_s is None or now_s >= self._next_quantum_s - 1e-6
        if boundary:
            self._quantum += 1
            self._shares(cy)
            self._rebalance(cy)
        self._shares(cy)
        if boundary:
            self._accrue(cy)
        run = self._schedule(cy, boundary)
        actions = self._emit(cy, run)
        contended = any(j not in run for j in cy.held) or len(cy.held) < len(snapshot.jobs)
        if boundary:
            self._next_quantum_s = now_s + self.quantum_s if contended else None
        return actions

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        return self._next_quantum_s

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        job = snapshot.by_id.get(job_id)
        if job is None:
            return f"job {job_id} is not active"
        mem = self._mem.get(job_id)
        user = job.spec.user
        ent = self._trade_result[0].get(user, {})
        ent_txt = ", ".join(f"{g}: {e:.2f}" for g, e in sorted(ent.items())) or "none yet"
        head = f"job {job_id} of user {user} (entitled GPUs {ent_txt})"
        if job.state is JobState.PENDING:
            return (
                f"{head} waits for a GPU with fewer than {self.max_jobs_per_gpu} jobs on it; "
                "pending jobs are admitted by their user's held GPUs per ticket, then arrival"
            )
        pas = f"{mem.pass_:.3f}" if mem and mem.pass_ is not None else "?"
        verb = "runs" if job.state is JobState.RUNNING else "is suspended"
        return (
            f"{head} {verb} on {job.placement} with pass {pas}: each quantum "
            f"({self.quantum_s:.0f} s) the jobs sharing its GPUs run in ascending pass order"
        )

    # ------------------------------------------------------------------ sync
    def _sync(self, snap: ClusterSnapshot, now: float) -> Cycle:
        cy = Cycle(snap=snap, now=now, pools=self._pools(snap))
        alive = set()
        for j in snap.jobs:
            jid = j.spec.job_id
            alive.add(jid)
            mem = self._mem.get(jid)
            if mem is None:
                mem = self._mem[jid] = JobMemory(seq=self._seq, placed_at_s=now)
                self._seq += 1
            if j.state is JobState.PENDING or j.placement is None:
                continue
            slots = frozenset(j.placement.slots())
            cy.held[j.job_id] = HeldJob(
                view=j,
                user=j.spec.user,
                size=j.placement.num_gpus,
                pool=self._pool_of_placement(snap, j.placement),
                slots=slots,
                servers=j.placement.nodes,
                running=j.state is JobState.RUNNING,
            )
            for s in slots:
                cy.holders[s].append(j.job_id)
        for gone in set(self._mem) - alive:
            del self._mem[gone]
        return cy

    @staticmethod
    def _pool_of_placement(snap: ClusterSnapshot, p: Placement) -> str:
        types = {snap.cluster.by_name[n].gpu_type for n in p.nodes}
        return types.pop() if len(types) == 1 else ANY_POOL

    # ------------------------------------------------------------------ tickets
    def _user_tickets(self, snap: ClusterSnapshot) -> dict[str, float]:
        out: dict[str, float] = {}
        for j in snap.jobs:
            u = j.spec.user
            if u in self.tickets:
                out[u] = self.tickets[u]
                continue
            hint = j.spec.attrs.get("tickets") if self.use_job_tickets else None
            if isinstance(hint, (int, float)) and not isinstance(hint, bool) and hint > 0:
                out[u] = max(out.get(u, 0.0), float(hint))
            else:
                out.setdefault(u, 0.0)
        return {u: (t if t > 0 else self.default_tickets) for u, t in out.items()}

    def _pools(self, snap: ClusterSnapshot) -> dict[str, int]:
        return {t: snap.cluster.gpus_of_type(t) for t in snap.cluster.gpu_types}

    def _user_type(self, snap: ClusterSnapshot) -> dict[str, str]:
        first: dict[str, tuple[int, str]] = {}
        for j in snap.jobs:
            seq = self._mem[j.spec.job_id].seq
            u = j.spec.user
            if u not in first or seq < first[u][0]:
                first[u] = (seq, self._job_type(j.spec))
        return {u: jt for u, (_, jt) in first.items()}

    def _speed(self, job_type: str, pool: str) -> float:
        got = self._speeds.get((job_type, pool))
        if got is None:
            got = self._speeds[(job_type, pool)] = speedup(job_type, pool, self.speedup_reference)
        return got

    def _job_type(self, spec: JobSpec) -> str:
        """:func:`job_type_of`, memoised by its inputs (the type name and batch size)."""
        declared = spec.attrs.get("job_type")
        name = declared if isinstance(declared, str) and declared else spec.model
        key = (name, spec.batch_size)
        got = self._job_types.get(key)
        if got is None:
            if len(self._job_types) > 4096:
                self._job_types.clear()
            got = self._job_types[key] = resolve_job_type(name, spec.batch_size)
        return got

    def _entitle(self, cy: Cycle) -> None:
        """Base entitlements, then trading among saturated users (cached)."""
        snap = cy.snap
        cy.user_tickets = self._user_tickets(snap)
        pools = self._pools(snap)
        base = base_entitlements(pools, cy.user_tickets)
        if not self.trading or len(pools) < 2:
            cy.entitlement = base
            self._trade_result = (base, [])
            return
        demand: dict[str, int] = defaultdict(int)
        for j in snap.jobs:
            demand[j.spec.user] += j.spec.num_gpus
        types = self._user_type(snap)
        saturated = sorted(
            u for u in base if demand[u] >= sum(base[u].values()) - EPS
        )
        key = (
            tuple(sorted(cy.user_tickets.items())),
            tuple(sorted(pools.items())),
            tuple((u, types[u]) for u in saturated),
        )
        if key != self._trade_key:
            speeds = {u: {g: self._speed(types[u], g) for g in pools} for u in saturated}
            rule = TRADE_RULES[self.trade_rule]
            self._trade_result = rule(base, speeds, generation_rank(list(pools)))
            self._trade_key = key
            self.counters["trade_rounds"] += 1
        cy.entitlement = self._trade_result[0]

    def _shares(self, cy: Cycle) -> None:
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
                               {h.job_id: 1.0 for h in hs}, self._ticket(cy, user, pool, 1))
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

    def _ticket(self, cy: Cycle, user: str, pool: str, n: int) -> float:
        ent = cy.entitlement.get(user, {})
        e = sum(ent.values()) if pool == ANY_POOL else ent.get(pool, 0.0)
        return max(e, _BACKGROUND_TICKETS) / max(1, n)

    # ------------------------------------------------------------------ placement
    def _admit(self, cy: Cycle) -> None:
        snap = cy.snap
        pending = [j for j in snap.pending]
        if not pending:
            return
        cap = self.max_jobs_per_gpu
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
        for j in sorted(pending, key=lambda v: self._mem[v.spec.job_id].seq):
            queues[j.spec.user].append(j)
        heap = [
            (held_gpus[u] / cy.user_tickets[u], self._mem[q[0].spec.job_id].seq, u)
            for u, q in queues.items()
        ]
        heapq.heapify(heap)
        cy.admit = self._admit_cache(cy)
        try:
            self._admit_loop(cy, heap, queues, held_gpus, room)
        finally:
            cy.admit = None

    def _admit_cache(self, cy: Cycle) -> AdmitCache:
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
            self._add_pass(cache, h)
        return cache

    def _add_pass(self, cache: AdmitCache, h: HeldJob) -> None:
        pass_ = self._mem[h.job_id].pass_
        if pass_ is None:
            return
        sums = cache.passes.setdefault(h.pool, [0, 0, 0, 0, 0, 0])
        for at in ((0, 3) if not h.capped else (3,)):
            sums[at] += h.tickets
            sums[at + 1] += h.tickets * (pass_ or 0.0)
            sums[at + 2] += 1

    def _admit_loop(self, cy: Cycle, heap: list[tuple[float, int, str]],
                    queues: dict[str, list[JobView]], held_gpus: dict[str, float],
                    room: int) -> None:
        while heap and room > 0:
            _, _, u = heapq.heappop(heap)
            q = queues[u]
            placed = False
            while q:
                j = q.pop(0)
                if j.spec.num_gpus <= room and self._place_new(cy, j):
                    room -= j.spec.num_gpus
                    held_gpus[u] += j.spec.num_gpus
                    placed = True
                    break
            if placed and q:
                heapq.heappush(
                    heap, (held_gpus[u] / cy.user_tickets[u], self._mem[q[0].spec.job_id].seq, u)
                )

    def _candidate_pools(self, cy: Cycle, job: JobView) -> list[str]:
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
        jt = self._job_type(job.spec)
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
            r = self._speed(jt, g)
            # idle room: runs at once, nobody is slowed down
            got = 1.0 if pd + size <= pools[g] else min(1.0, ent.get(g, 0.0) / (d + size))
            scored.append((-r * got, -r, g))
        scored.sort()  # the pools by (-r * got, -r, name)
        return [g for *_, g in scored]

    def _servers(self, cy: Cycle, pool: str, job: JobView) -> list[Node]:
        want = job.spec.gpu_type
        return [
            n for n in cy.snap.cluster.nodes
            if n.num_gpus > 0
            and (n.gpu_type == pool or (pool == ANY_POOL and (want is None or n.gpu_type == want)))
        ]

    def _choose_gpus(
        self,
        cy: Cycle,
        nodes: list[Node],
        size: int,
        share: float,
        exclude: str | None = None,
        only_free: bool = False,
    ) -> Placement | None:
        """The GPUs that minimise the resulting load (module docstring), or None.
        ``only_free``: use only GPUs no other job holds."""
        cap = 1 if only_free else self.max_jobs_per_gpu
        order = {n.name: i for i, n in enumerate(nodes)}
        best: tuple | None = None
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
                for pick in self._slot_sets(avail, size, n.num_gpus):
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

    def _choose_admit(self, cy: Cycle, key: tuple[str, str | None], nodes: list[Node],
                      size: int, share: float) -> Placement | None:
        """:meth:`_choose_gpus` (no job excluded, any GPU under the capacity) during
        admission: single-server sets through a :class:`PickIndex`."""
        admit = cy.admit
        assert admit is not None
        widest = admit.widest.get(key)
        if widest is None:
            widest = admit.widest[key] = max((n.num_gpus for n in nodes), default=0)
        if widest < size:  # wider than a server: _choose_gpus' multi-server ranking
            wide = admit.wide.get(key)
            if wide is None:
                wide = admit.wide[key] = WideIndex(nodes, self.max_jobs_per_gpu, admit)
            return wide.take(size)
        index = admit.picks.get((*key, size))
        if index is None:
            index = admit.picks[(*key, size)] = PickIndex(
                nodes, size, self.max_jobs_per_gpu, admit)
        got = index.best(share)
        if got is None:
            return None
        placement = admit.placements.get(got)
        if placement is None:  # frozen: one object per GPU set and cycle
            placement = admit.placements[got] = Placement.of({got[0]: list(got[1])})
        return placement

    @staticmethod
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

    def _place_new(self, cy: Cycle, job: JobView) -> bool:
        for pool in self._candidate_pools(cy, job):
            key = (pool, job.spec.gpu_type if pool == ANY_POOL else None)
            if cy.admit is not None:
                nodes = cy.admit.servers.get(key) or self._servers(cy, pool, job)
                cy.admit.servers[key] = nodes
            else:
                nodes = self._servers(cy, pool, job)
            if cy.admit is not None:
                n_user = cy.admit.per_user_pool.get((job.spec.user, pool), 0)
            else:
                n_user = sum(1 for h in cy.held.values()
                             if h.user == job.spec.user and h.pool == pool)
            t = self._ticket(cy, job.spec.user, pool, n_user + 1)
            lam = cy.lam.get(pool, math.inf)
            share = min(1.0, lam * t / job.spec.num_gpus)
            if cy.admit is not None:
                p = self._choose_admit(cy, key, nodes, job.spec.num_gpus, share)
            else:
                p = self._choose_gpus(cy, nodes, job.spec.num_gpus, share)
            if p is None:
                continue
            self._occupy(cy, job, p, pool, share, t)
            mem = self._mem[job.job_id]
            if mem.pass_ is None:
                mem.pass_ = mem.due = self._join_pass(cy, pool)
            if cy.admit is not None:
                self._add_pass(cy.admit, cy.held[job.job_id])
            mem.placed_at_s = cy.now
            return True
        return False

    def _occupy(
        self, cy: Cycle, job: JobView, p: Placement, pool: str, share: float, tickets: float
    ) -> None:
        """Record a placement and emit its Start/Share."""
        jid = job.spec.job_id
        holders = cy.holders
        slot_list = list(p.slots())
        self._start_or_share(cy, jid, p, slot_list, "gandiva-fair: time-slice GPUs",
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

    @staticmethod
    def _start_or_share(cy: Cycle, job_id: str, p: Placement, slots: Iterable[Slot],
                        share_reason: str, start_reason: str) -> None:
        """Emit a Start on ``p``, or a Share with the jobs holding any of its ``slots``."""
        others = sorted({o for s in slots for o in cy.holders.get(s, ())})
        if others:
            cy.pre.append(Share(job_id=job_id, placement=p, with_jobs=tuple(others),
                                reason=share_reason))
        else:
            cy.pre.append(Start(job_id=job_id, placement=p, reason=start_reason))

    def _join_pass(self, cy: Cycle, pool: str) -> float:
        """Pool virtual time: ticket-weighted mean pass of its uncapped jobs (all jobs when
        every one is capped); the last known value for an empty pool."""
        if cy.admit is not None:
            sums = cy.admit.passes.get(pool, [0, 0, 0, 0, 0, 0])
            den, num = (sums[0], sums[1]) if sums[2] else (sums[3], sums[4])
            if den > 0:
                self._pool_vt[pool] = num / den
            return self._pool_vt.get(pool, 0.0)
        hs = [h for h in cy.held.values() if h.pool == pool and self._mem[h.job_id].pass_
              is not None]
        pick = [h for h in hs if not h.capped] or hs
        den = sum(h.tickets for h in pick)
        if den > 0:
            vt = sum(h.tickets * (self._mem[h.job_id].pass_ or 0.0) for h in pick) / den
            self._pool_vt[pool] = vt
        return self._pool_vt.get(pool, 0.0)

    # ------------------------------------------------------------------ migration
    def _movable(self, cy: Cycle, h: HeldJob) -> bool:
        mem = self._mem[h.job_id]
        return (
            not h.moved
            and h.job_id not in cy.newly_running
            and cy.now - mem.placed_at_s >= self.min_residence_s * mem.backoff - EPS
        )

    def _moved(self, cy: Cycle, job_id: str) -> None:
        """Book a move: residence restarts; back off if the previous move did not help."""
        mem = self._mem[job_id]
        if mem.lag_at_move is not None and mem.lag > mem.lag_at_move + EPS:
            mem.backoff = min(16, mem.backoff * 2)
        elif mem.lag_at_move is not None:
            mem.backoff = 1
        mem.lag_at_move = mem.lag
        mem.placed_at_s = cy.now

    def _rebalance(self, cy: Cycle) -> None:
        budget = self.max_moves_per_round
        budget -= self._pool_moves(cy, budget)
        if budget <= 0:
            return
        budget -= self._to_free_gpus(cy, budget)
        if budget <= 0:
            return
        self._shares(cy)
        budget -= self._load_moves(cy, budget)
        if budget >= 2:
            self._shares(cy)
            self._swaps(cy, budget)

    def _move(self, cy: Cycle, h: HeldJob, p: Placement, pool: str) -> None:
        """Move a held job to ``p`` (Migrate to free GPUs, else Preempt + Start/Share)."""
        for s in h.slots:
            cy.holders[s].remove(h.job_id)
        target_free = all(not cy.holders.get(s) for s in p.slots())
        if h.running and target_free:
            cy.pre.append(Migrate(job_id=h.job_id, placement=p, reason="gandiva-fair: balance"))
        else:
            cy.pre.append(Preempt(job_id=h.job_id, reason="gandiva-fair: move"))
            self._start_or_share(cy, h.job_id, p, p.slots(), "gandiva-fair: move",
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
        self._moved(cy, h.job_id)
        self.counters["moves"] += 1

    def _pool_moves(self, cy: Cycle, budget: int) -> int:
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
                (h for h in hs if h.pool == over and self._movable(cy, h)
                 and pools[under] >= h.size),
                key=lambda h: (-h.size, self._mem[h.job_id].seq),
            )
            for h in cands:
                before = abs(d[over] - target[over]) + abs(d[under] - target[under])
                after = (abs(d[over] - h.size - target[over])
                         + abs(d[under] + h.size - target[under]))
                if after >= before - EPS:
                    continue
                nodes = self._servers(cy, under, h.view)
                t = self._ticket(cy, user, under, 1 + sum(1 for x in hs if x.pool == under))
                share = min(1.0, cy.lam.get(under, math.inf) * t / h.size)
                p = self._choose_gpus(cy, nodes, h.size, share, exclude=h.job_id)
                if p is None:
                    continue
                self._move(cy, h, p, under)
                used += 1
                break
        return used

    def _to_free_gpus(self, cy: Cycle, budget: int) -> int:
        """Work conservation by migration: a time-sliced job (most behind first, wide gangs
        included) moves to GPUs nobody holds, when its pool has enough of them."""
        free = {n.name: n.num_gpus - sum(1 for g in range(n.num_gpus) if cy.holders.get(
            (n.name, g))) for n in cy.snap.cluster.nodes}
        if sum(free.values()) == 0:
            return 0
        sliced = [
            h for h in cy.held.values()
            if h.pool != ANY_POOL and self._movable(cy, h)
            and any(len(cy.holders.get(s, ())) > 1 for s in h.slots)
        ]
        sliced.sort(key=lambda h: (-self._mem[h.job_id].lag, self._mem[h.job_id].seq))
        used = 0
        for h in sliced:
            if used >= budget:
                break
            nodes = self._servers(cy, h.pool, h.view)
            if sum(free[n.name] for n in nodes) < h.size:
                continue
            p = self._choose_gpus(cy, nodes, h.size, h.share, exclude=h.job_id, only_free=True)
            if p is None:
                continue
            for node, gpus in p.as_dict.items():
                free[node] -= len(gpus)
            self._move(cy, h, p, h.pool)
            used += 1
        return used

    def _gpu_loads(self, cy: Cycle, pool: str) -> dict[Slot, float]:
        return {
            (n.name, g): cy.load((n.name, g))
            for n in cy.snap.cluster.nodes if n.gpu_type == pool
            for g in range(n.num_gpus)
        }

    def _load_moves(self, cy: Cycle, budget: int) -> int:
        """When a pool's GPU load spread exceeds theta x the mean, move one job off one of its
        most loaded GPUs (the first, from the top, that has a move lowering its peak load by
        at least theta/2 x the mean), the job whose share is closest to half the spread."""
        used = 0
        for pool in sorted(cy.pools):
            if used >= budget:
                break
            loads = self._gpu_loads(cy, pool)
            if not loads:
                continue
            mean = sum(loads.values()) / len(loads)
            lo = min(loads.values())
            top = sorted(loads, key=lambda s: (-loads[s], s))[:8]
            if mean <= 0 or loads[top[0]] - lo <= self.theta * mean:
                continue
            margin = self.theta * mean / 2
            moved = False
            for hi_slot in top:
                gap = loads[hi_slot] - lo
                if moved or gap <= self.theta * mean:
                    break
                cands = [
                    cy.held[j] for j in cy.holders.get(hi_slot, ())
                    if len(cy.held[j].servers) == 1 and self._movable(cy, cy.held[j])
                ]
                cands.sort(key=lambda h: (abs(h.share - gap / 2), self._mem[h.job_id].seq))
                for h in cands:
                    nodes = self._servers(cy, pool, h.view)
                    p = self._choose_gpus(cy, nodes, h.size, h.share, exclude=h.job_id)
                    if p is None or frozenset(p.slots()) == h.slots:
                        continue
                    new_peak = max(cy.load(s, h.job_id) for s in p.slots()) + h.share
                    old_peak = max(loads[s] for s in h.slots)
                    if new_peak < old_peak - margin:
                        self._move(cy, h, p, pool)
                        used += 1
                        moved = True
                        break
        return used

    def _swaps(self, cy: Cycle, budget: int) -> int:
        """Swap a job that lags its fair share on a crowded GPU with a same-size job ahead of
        its share on a lighter GPU (lag = due - pass, in pass units)."""
        used = 0
        groups: dict[tuple[str, int], list[HeldJob]] = defaultdict(list)
        for h in cy.held.values():
            if (len(h.servers) == 1 and self._movable(cy, h)
                    and self._mem[h.job_id].pass_ is not None):
                groups[(h.pool, h.size)].append(h)
        candidates: list[tuple[float, str, HeldJob, list[HeldJob]]] = []
        for hs in groups.values():
            hs.sort(key=lambda h: (self._mem[h.job_id].lag, h.job_id))  # most ahead first
            for h in hs[-8:]:
                candidates.append((-self._mem[h.job_id].lag, h.job_id, h, hs))
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
                if -neg_lag - self._mem[ahead.job_id].lag <= self.swap_threshold_quanta * stride:
                    break  # lags only get closer from here
                # The job behind must find a lighter place than it leaves, counting the swap.
                after = max(cy.load(s) - ahead.share + behind.share for s in ahead.slots)
                if after >= peak[behind.job_id] - 1e-6:
                    continue
                self._swap(cy, behind, ahead)
                done.update((behind.job_id, ahead.job_id))
                used += 2
                break
        return used

    def _swap(self, cy: Cycle, a: HeldJob, b: HeldJob) -> None:
        pa = Placement.of(self._by_node(a.slots))
        pb = Placement.of(self._by_node(b.slots))
        for h in (a, b):
            for s in h.slots:
                cy.holders[s].remove(h.job_id)
            cy.pre.append(Preempt(job_id=h.job_id, reason="gandiva-fair: pass swap"))
        for h, p in ((a, pb), (b, pa)):
            self._start_or_share(cy, h.job_id, p, p.slots(), "gandiva-fair: pass swap",
                                 "gandiva-fair: swap")
            h.slots = frozenset(p.slots())
            h.servers = p.nodes
            h.running = True
            h.moved = True
            self._moved(cy, h.job_id)
        for h in (a, b):
            for s in h.slots:
                cy.holders[s].append(h.job_id)
        self.counters["swaps"] += 1
        self.counters["moves"] += 2

    @staticmethod
    def _by_node(slots: frozenset[Slot]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = defaultdict(list)
        for node, g in sorted(slots):
            out[node].append(g)
        return dict(out)

    # ------------------------------------------------------------------ scheduling
    def _accrue(self, cy: Cycle) -> None:
        """Advance every held job's fair-share pass by one quantum of its water-filled GPUs."""
        for h in cy.held.values():
            mem = self._mem[h.job_id]
            if mem.pass_ is not None:
                mem.due += h.share * h.size / h.tickets

    def _client(self, h: HeldJob) -> StrideClient:
        mem = self._mem[h.job_id]
        return StrideClient(h.job_id, h.size, h.tickets, pass_=mem.pass_ or 0.0,
                            last_run=mem.last_run, seq=mem.seq, slots=h.slots)

    def _store(self, c: StrideClient) -> None:
        mem = self._mem[c.key]
        mem.pass_ = c.pass_
        mem.last_run = c.last_run

    def _schedule(self, cy: Cycle, boundary: bool) -> set[str]:
        """The jobs to run from now on (module docstring: split stride)."""
        self._adopt(cy)
        q = self._quantum
        if not boundary:
            keep = {
                j for j, h in cy.held.items()
                if h.running and j not in cy.newly_running and not h.moved
            }
            busy = {s for j in keep for s in cy.held[j].slots}
            rest = [self._client(h) for j, h in cy.held.items() if j not in keep]
            left = max(0.0, (self._next_quantum_s or cy.now) - cy.now) / self.quantum_s
            chosen = slot_stride_round(rest, q, busy, fraction=min(1.0, left))
            for c in chosen:
                self._store(c)
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
            clients = sorted((self._client(h) for h in large),
                             key=lambda c: (-round(self._mem[c.key].lag, PASS_DIGITS),
                                            c.last_run, c.seq))
            for c in clients:
                if not claimed.isdisjoint(c.slots):
                    continue
                lag = round(self._mem[c.key].lag, PASS_DIGITS)
                blocked = False
                for server in cy.held[c.key].servers:
                    rivals = [h for h in local.get(server, ()) if not c.slots.isdisjoint(h.slots)]
                    den = sum(h.tickets for h in rivals)
                    if den <= 0:
                        continue
                    mean = sum(h.tickets * self._mem[h.job_id].lag for h in rivals) / den
                    if lag < round(mean, PASS_DIGITS):
                        blocked = True
                        break
                if blocked:
                    continue
                c.charge(q)
                self._store(c)
                claimed.update(c.slots)
                run.add(c.key)
        for server in sorted(local):
            chosen = slot_stride_round([self._client(h) for h in local[server]], q, claimed)
            for c in chosen:
                self._store(c)
                run.add(c.key)
        # Work conservation: a central job whose GPUs nobody took this quantum runs too.
        for c in sorted((self._client(h) for h in large if h.job_id not in run), key=sort_key):
            if claimed.isdisjoint(c.slots):
                c.charge(q)
                self._store(c)
                claimed.update(c.slots)
                run.add(c.key)
        return run

    def _adopt(self, cy: Cycle) -> None:
        """Jobs without a pass (policy restarted, or placed elsewhere) join their pool's
        virtual time (:meth:`_join_pass`), in ``held`` order.

        Many at once (a restart under thousands of jobs): each pool's jobs with a pass are kept
        in ``held`` order as lists of tickets and tickets x pass, so each join sums those lists
        (the same sums in the same order) instead of filtering every held job."""
        adopted = [h for h in cy.held.values() if self._mem[h.job_id].pass_ is None]
        if len(adopted) < 2:
            for h in adopted:
                mem = self._mem[h.job_id]
                mem.pass_ = mem.due = self._join_pass(cy, h.pool)
            return
        where = {j: i for i, j in enumerate(cy.held)}
        # pool -> per list (uncapped jobs at 0, all at 3): jobs, terms tickets x pass that are
        # not 0.0, tickets that are not > 0. With jobs and none of the others the sums need
        # not be taken: sum(weighted) is 0.0 and sum(tickets) > 0, so the pool's virtual time
        # is 0.0 (a restart: every job placed so far joined an empty pool at 0).
        stats: dict[str, list[int]] = {}
        # pool -> positions, tickets, tickets x pass of uncapped jobs (0-2), then all (3-5);
        # built when a pool's sums must be taken, then kept up to date
        lists: dict[str, tuple[list, list, list, list, list, list]] = {}

        def add(h: HeldJob) -> None:
            w = h.tickets * (self._mem[h.job_id].pass_ or 0.0)
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

        def build(pool: str) -> tuple[list, list, list, list, list, list]:
            ls: tuple[list, list, list, list, list, list] = ([], [], [], [], [], [])
            for i, h in enumerate(cy.held.values()):
                pass_ = self._mem[h.job_id].pass_
                if h.pool != pool or pass_ is None:
                    continue
                for at in ((0, 3) if not h.capped else (3,)):
                    ls[at].append(i)
                    ls[at + 1].append(h.tickets)
                    ls[at + 2].append(h.tickets * (pass_ or 0.0))
            lists[pool] = ls
            return ls

        for h in cy.held.values():
            if self._mem[h.job_id].pass_ is not None:
                add(h)
        for h in adopted:
            st = stats.get(h.pool, [0, 0, 0, 0, 0, 0])
            at = 0 if st[0] else 3
            if st[at] and st[at + 1] == 0 and st[at + 2] == 0:
                self._pool_vt[h.pool] = 0.0  # = sum(weighted) / sum(tickets)
            else:
                ls = lists.get(h.pool) or build(h.pool)
                den = sum(ls[at + 1])
                if den > 0:
                    self._pool_vt[h.pool] = sum(ls[at + 2]) / den
            mem = self._mem[h.job_id]
            mem.pass_ = mem.due = self._pool_vt.get(h.pool, 0.0)
            add(h)

    def _emit(self, cy: Cycle, run: set[str]) -> list[Action]:
        actions: list[Action] = list(cy.pre)
        resumes: list[Action] = []
        for j, h in cy.held.items():
            running_now = h.running or j in cy.newly_running
            if j in run and not running_now:
                resumes.append(Resume(job_id=j, reason="gandiva-fair: its stride turn"))
            elif j not in run and running_now:
                actions.append(Suspend(job_id=j, reason="gandiva-fair: quantum over"))
                self.counters["suspends"] += 1
        self.counters["resumes"] += len(resumes)
        return actions + resumes


class GandivaFairNoTrade(GandivaFair):
    """Gandiva_fair without GPU trading: every user keeps its base per-pool entitlement (the
    "no trading" baseline of the slides' heterogeneous experiment)."""

    name = "gandiva-fair-notrade"
    summary = "Gandiva_fair without GPU trading (base per-pool entitlements)"
    fixed_options = ("trading",)

    def __init__(self, tickets: Mapping[str, float] | None = None, **kwargs: object) -> None:
        kwargs["trading"] = False
        super().__init__(tickets, **kwargs)  # type: ignore[arg-type]


POLICIES = [GandivaFair, GandivaFairNoTrade]
