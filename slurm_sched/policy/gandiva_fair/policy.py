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

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from slurm_sched.model import Action, ClusterSnapshot, JobState
from slurm_sched.policy.base import Policy
from slurm_sched.policy.gandiva_fair.job_state import JobMemory
from slurm_sched.policy.gandiva_fair.migration import rebalance
from slurm_sched.policy.gandiva_fair.placement import admit
from slurm_sched.policy.gandiva_fair.scheduling import accrue, emit, schedule
from slurm_sched.policy.gandiva_fair.sync import sync
from slurm_sched.policy.gandiva_fair.tickets import TRADE_RULES, entitle, shares
from slurm_sched.policy.gandiva_trading import Trade


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
        # State kept across cycles, read and updated by the parts (.sync, .tickets,
        # .placement, .migration, .scheduling): what it remembers per job, the job arrival
        # counter, the quantum count and the next quantum's time, and each pool's last virtual
        # time.
        self.mem: dict[str, JobMemory] = {}
        self.seq = 0
        self.quantum = 0
        self.next_quantum_s: float | None = None
        self.pool_vt: dict[str, float] = {}
        #: Memo of pure lookups: speed-ups by (job type, pool), job types by (name, batch)
        self.speeds: dict[tuple[str, str], float] = {}
        self.job_types: dict[tuple[str | None, int | None], str] = {}
        #: Inputs and result of the last trading round (recomputed when the inputs change)
        self.trade_key: tuple[Any, ...] | None = None
        self.trade_result: tuple[dict[str, dict[str, float]], list[Trade]] = ({}, [])
        #: Overhead counters (suspends, resumes, moves, swaps, trade rounds).
        self.counters: dict[str, int] = defaultdict(int)

    # ------------------------------------------------------------------ public
    @property
    def last_trades(self) -> list[Trade]:
        return list(self.trade_result[1])

    @property
    def last_entitlements(self) -> dict[str, dict[str, float]]:
        return {u: dict(e) for u, e in self.trade_result[0].items()}

    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        cy = sync(self, snapshot, now_s)
        if not snapshot.jobs or not snapshot.cluster.total_gpus:
            self.next_quantum_s = None
            return []
        entitle(self, cy)
        shares(cy)
        admit(self, cy)
        boundary = self.next_quantum_s is None or now_s >= self.next_quantum_s - 1e-6
        if boundary:
            self.quantum += 1
            shares(cy)
            rebalance(self, cy)
        shares(cy)
        if boundary:
            accrue(self, cy)
        run = schedule(self, cy, boundary)
        actions = emit(self, cy, run)
        contended = any(j not in run for j in cy.held) or len(cy.held) < len(snapshot.jobs)
        if boundary:
            self.next_quantum_s = now_s + self.quantum_s if contended else None
        return actions

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        return self.next_quantum_s

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        job = snapshot.by_id.get(job_id)
        if job is None:
            return f"job {job_id} is not active"
        mem = self.mem.get(job_id)
        user = job.spec.user
        ent = self.trade_result[0].get(user, {})
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
