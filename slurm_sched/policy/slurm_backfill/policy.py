"""``slurm-backfill``: Slurm's own scheduling (priority/multifactor + sched/backfill) on GPUs.

Sources: https://slurm.schedmd.com/priority_multifactor.html (the priority, see
:mod:`.priority`), https://slurm.schedmd.com/classic_fair_share.html (the fair-share factor),
https://slurm.schedmd.com/sched_config.html (main scheduler and backfill), slurm.conf(5)
(``SchedulerParameters``: ``bf_interval``, ``bf_window``, ``bf_max_job_test``).

What a cycle does:

- Priorities are Slurm's multifactor sum (:mod:`.priority`): a job's priority is computed when
  it is first seen and recomputed for every pending job each ``calc_period_s``
  (``PriorityCalcPeriod``, Slurm's decay thread), not at every cycle. Order: priority, then
  submit time, then job id (numeric ids as numbers). All weights 0 (``priority/basic``) is FIFO.
- Main scheduler (every cycle): in priority order, start each job that fits on the free GPUs;
  stop at the first that does not (Slurm's main scheduler leaves the rest of a partition
  pending once one job of it is left pending; the cluster is one partition).
- Backfill (``backfill=True``, sched/backfill; at most once each ``bf_interval_s``): walk the
  first ``bf_max_job_test`` pending jobs in priority order. The first job that does not fit
  and whose reservation falls within ``bf_window_s`` gets one: the earliest time enough GPUs
  of its type free up if every running job runs until its start plus its time limit
  (``JobSpec.time_limit_s``, else ``default_time_limit_s``), and the GPUs it takes then. A
  later job starts now if it fits on the free GPUs and either ends (by its time limit) by the
  reserved time, or fits without the reserved GPUs. Before a reservation is made, any job that
  fits starts (a blocked job whose reservation would fall past the window holds nothing).
- Placement: exclusive GPUs, consolidated best fit (the fewest nodes, then cluster order), as
  select/cons_tres allocates; a job with a ``gpu_type`` only on GPUs of that type. No sharing,
  no preemption.

What differs from Slurm (documented limits):

- One reservation per pass (EASY backfill). Slurm reserves for every job it tests within the
  window (up to ``bf_max_job_test``), so a lower job can also not delay the second, third...
  blocked job there; here only the first blocked job is protected.
- No ``bf_resolution`` rounding of times, no per-user/partition backfill limits
  (``bf_max_job_user``...), no ``default_queue_depth``/``sched_interval`` split: the main
  scheduler runs at every cycle over the whole queue (it stops at the first blocked job).
- No QOS, partition, association, nice, site or TRES priority terms (a trace has none).
- The backfill pass runs only when something changed since the last one (a job arrived,
  ended, started or was re-prioritised): an unchanged cluster gives the same pass again.

Cost per cycle: set operations over the pending ids (C-level), the main scheduler's walk to
the first blocked job, and, for a backfill pass, a sort of the running jobs by end plus at most
``bf_max_job_test`` placements on a :class:`~slurm_sched.policy.placement.FreeIndex`.
"""

from __future__ import annotations

import math
from bisect import insort
from collections.abc import Mapping
from operator import attrgetter

from slurm_sched.model import (
    Action,
    Cluster,
    ClusterSnapshot,
    JobSpec,
    JobState,
    Placement,
    Start,
)
from slurm_sched.policy.base import Policy
from slurm_sched.policy.placement import FreeIndex, free_map
from slurm_sched.policy.slurm_backfill.backfill import Planner, Reservation, Running, slots_of
from slurm_sched.policy.slurm_backfill.priority import FairShare, age_factor, size_factor

DAY_S = 86_400.0
_ID = attrgetter("spec.job_id")
#: Times compared up to this slack (float sums of limits and starts).
_EPS = 1e-6

#: A pending job's place in the queue: (-priority, submit time, numeric id or -1, job id).
QueueKey = tuple[float, float, int, str]


def _numeric_id(job_id: str) -> int:
    return int(job_id) if job_id.isdigit() else -1


class SlurmBackfill(Policy):
    """Slurm's priority/multifactor ordering with its main scheduler and EASY backfill."""

    name = "slurm-backfill"
    paper = "Slurm priority/multifactor + sched/backfill (slurm.schedmd.com)"
    summary = ("Slurm's own scheduling: multifactor priority (age, size, fair share), "
               "strict priority order, backfill by time limits; exclusive, non-preemptive")

    def __init__(
        self,
        weight_age: float = 0.0,
        weight_job_size: float = 0.0,
        weight_fairshare: float = 0.0,
        max_age_s: float = 7 * DAY_S,
        favor_small: bool = False,
        decay_half_life_s: float = 7 * DAY_S,
        calc_period_s: float = 300.0,
        shares: Mapping[str, float] | None = None,
        backfill: bool = True,
        bf_interval_s: float = 30.0,
        bf_window_s: float = 1440 * 60.0,
        bf_max_job_test: int = 500,
        default_time_limit_s: float = 365 * DAY_S,
    ) -> None:
        for label, w in (("weight_age", weight_age), ("weight_job_size", weight_job_size),
                         ("weight_fairshare", weight_fairshare)):
            if not isinstance(w, int | float) or isinstance(w, bool) or not 0 <= w < math.inf:
                raise ValueError(f"{label} must be a number >= 0, got {w!r}")
        for label, v in (("max_age_s", max_age_s), ("calc_period_s", calc_period_s),
                         ("bf_interval_s", bf_interval_s), ("bf_window_s", bf_window_s),
                         ("default_time_limit_s", default_time_limit_s)):
            if not isinstance(v, int | float) or isinstance(v, bool) or not 0 < v < math.inf:
                raise ValueError(f"{label} must be a positive number of seconds, got {v!r}")
        if (not isinstance(decay_half_life_s, int | float) or isinstance(decay_half_life_s, bool)
                or not 0 <= decay_half_life_s < math.inf):
            raise ValueError(f"decay_half_life_s must be >= 0 (0: no decay), "
                             f"got {decay_half_life_s!r}")
        if not isinstance(bf_max_job_test, int) or isinstance(bf_max_job_test, bool) \
                or bf_max_job_test < 1:
            raise ValueError(f"bf_max_job_test must be a whole number >= 1, got "
                             f"{bf_max_job_test!r}")
        for label, flag in (("favor_small", favor_small), ("backfill", backfill)):
            if not isinstance(flag, bool):
                raise ValueError(f"{label} must be true or false, got {flag!r}")
        raw_shares: dict[str, float] = {}
        if shares is not None:
            if not isinstance(shares, Mapping):
                raise ValueError(f"shares must map account -> shares, got {shares!r}")
            for account, s in shares.items():
                if not isinstance(s, int | float) or isinstance(s, bool) or not 0 <= s < math.inf:
                    raise ValueError(f"shares of {account!r} must be a number >= 0, got {s!r}")
                raw_shares[str(account)] = float(s)
        self.weight_age = float(weight_age)
        self.weight_job_size = float(weight_job_size)
        self.weight_fairshare = float(weight_fairshare)
        self.max_age_s = float(max_age_s)
        self.favor_small = favor_small
        self.decay_half_life_s = float(decay_half_life_s)
        self.calc_period_s = float(calc_period_s)
        self.backfill = backfill
        self.bf_interval_s = float(bf_interval_s)
        self.bf_window_s = float(bf_window_s)
        self.bf_max_job_test = bf_max_job_test
        self.default_time_limit_s = float(default_time_limit_s)
        #: priorities change with time only through age and fair share
        self._time_varying = self.weight_age > 0 or self.weight_fairshare > 0
        self._fair = FairShare(self.decay_half_life_s, raw_shares)
        # Learned state. Pending jobs: id -> spec and queue key; the queue, sorted, holds
        # stale keys too (a job started or gone), skipped where met: a key is current when
        # it is the very object ``_keys`` holds.
        self._specs: dict[str, JobSpec] = {}
        self._keys: dict[str, QueueKey] = {}
        self._order: list[QueueKey] = []
        self._running: dict[str, Running] = {}
        self._next_calc_s = -math.inf
        self._next_bf_s = -math.inf
        self._bf_dirty = True
        self._free_after = 0
        self._cluster_gpus = 0
        self._types: dict[str, str] = {}
        self._types_of: Cluster | None = None
        #: the reservation of the last backfill pass (None: it made none)
        self.reservation: Reservation | None = None
        #: set True to keep every reservation made in :attr:`reservation_log` (tests)
        self.record_reservations = False
        self.reservation_log: list[Reservation] = []

    # ------------------------------------------------------------------ priority
    def time_limit_s(self, spec: JobSpec) -> float:
        """The limit backfill assumes for a job: its own, else ``default_time_limit_s``."""
        return spec.time_limit_s if spec.time_limit_s is not None else self.default_time_limit_s

    def priority(self, spec: JobSpec, now_s: float) -> float:
        """The job's multifactor priority at ``now_s`` (see :mod:`.priority`)."""
        p = 0.0
        if self.weight_age:
            p += self.weight_age * age_factor(now_s - spec.submit_time_s, self.max_age_s)
        if self.weight_job_size:
            p += self.weight_job_size * size_factor(spec.num_gpus, self._cluster_gpus,
                                                    self.favor_small)
        if self.weight_fairshare:
            p += self.weight_fairshare * self._fair.factor(spec.user, now_s)
        return p

    def fairshare_factor(self, account: str, now_s: float) -> float:
        """The classic fair-share factor of ``account`` as the policy has accrued it."""
        return self._fair.factor(account, now_s)

    def _key(self, spec: JobSpec, now_s: float) -> QueueKey:
        jid = spec.job_id
        return (-self.priority(spec, now_s), spec.submit_time_s, _numeric_id(jid), jid)

    def queue(self) -> list[str]:
        """The pending jobs the policy knows, in priority order (highest first)."""
        keys = self._keys
        return [k[3] for k in self._order if keys.get(k[3]) is k]

    # ------------------------------------------------------------------ bookkeeping
    def _gpu_types(self, cluster: Cluster) -> dict[str, str]:
        if self._types_of is not cluster:
            self._types = {n.name: n.gpu_type for n in cluster.nodes}
            self._types_of = cluster
            self._cluster_gpus = cluster.total_gpus
        return self._types

    def _enqueue(self, specs: list[JobSpec], now_s: float) -> None:
        for spec in specs:
            key = self._key(spec, now_s)
            self._specs[spec.job_id] = spec
            self._keys[spec.job_id] = key
            insort(self._order, key)
        self._bf_dirty = True

    def _forget_pending(self, job_id: str) -> None:
        self._specs.pop(job_id, None)
        self._keys.pop(job_id, None)

    def _sync_pending(self, snapshot: ClusterSnapshot, now_s: float, full: bool) -> None:
        """Bring the queue in line with the snapshot's pending jobs.

        Fast paths (no scan of every pending id): the same count with a known last job, or
        ``k`` more jobs whose last ``k`` are all new and preceded by a known one (new jobs are
        the newest, so they come last in submission order). Anything else, or ``full``, is a
        set comparison of every id."""
        pending = snapshot.pending
        keys = self._keys
        n, known = len(pending), len(keys)
        if not full:
            if n == known and (n == 0 or _ID(pending[-1]) in keys):
                return
            k = n - known
            if k > 0 and (n == k or _ID(pending[-k - 1]) in keys):
                tail = pending[-k:]
                if not any(_ID(v) in keys for v in tail):
                    self._enqueue([v.spec for v in tail], now_s)
                    return
        by_id = dict(zip(map(_ID, pending), pending, strict=True))
        gone = keys.keys() - by_id.keys()
        for jid in gone:
            self._forget_pending(jid)
        new = by_id.keys() - keys.keys()
        if gone:
            self._bf_dirty = True
        if new:
            self._enqueue([by_id[j].spec for j in sorted(new)], now_s)

    def _sync_running(self, snapshot: ClusterSnapshot, now_s: float) -> None:
        """Bring the running jobs in line with the snapshot (ended ones out, unknown ones in).

        A known job whose first GPU is free again has ended (GPUs are exclusive, and a GPU
        freed since the last cycle cannot have been taken by anyone but this policy in
        between): a look at each running job, not at every job of the snapshot. When the
        count of non-pending jobs still disagrees, the ids are compared."""
        running = self._running
        active_n = len(snapshot.jobs) - len(snapshot.pending)
        if active_n == len(running):
            return
        free = snapshot.free_gpus
        for jid in [j for j, r in running.items() if r.slots[0][1] in free[r.slots[0][0]]]:
            self._end(jid, now_s)
        if active_n == len(running):
            return
        active = set(map(_ID, snapshot.jobs)) - set(map(_ID, snapshot.pending))
        for jid in running.keys() - active:
            self._end(jid, now_s)
        unknown = active - running.keys()
        if unknown:
            types = self._gpu_types(snapshot.cluster)
            by_id = snapshot.by_id
            for jid in sorted(unknown):
                v = by_id[jid]
                if v.placement is None or v.state is JobState.PENDING:
                    continue
                start = v.first_start_s if v.first_start_s is not None else v.accounted_at_s
                self._track(v.spec, slots_of(v.placement, types),
                            start + self.time_limit_s(v.spec), now_s)
            self._bf_dirty = True

    def _end(self, job_id: str, now_s: float) -> None:
        r = self._running.pop(job_id)
        self._fair.add_rate(r.account, -r.gpus, now_s)
        self._bf_dirty = True

    def _track(self, spec: JobSpec, slots: tuple[tuple[str, int, str], ...], end_s: float,
               now_s: float) -> Running:
        r = Running(end_s, len(slots), spec.user, slots)
        self._running[spec.job_id] = r
        self._fair.add_rate(spec.user, r.gpus, now_s)
        return r

    def _recalculate(self, now_s: float) -> None:
        """Slurm's periodic priority recalculation: every pending job's key at ``now_s``.

        :meth:`priority` inlined, with each account's fair-share factor computed once: this
        loop runs over the whole queue every ``calc_period_s``."""
        keys = self._keys
        w_age, max_age = self.weight_age, self.max_age_s
        w_size, w_fs = self.weight_job_size, self.weight_fairshare
        total, small = self._cluster_gpus, self.favor_small
        fair: dict[str, float] = {}
        for jid, spec in self._specs.items():
            submit = spec.submit_time_s
            p = w_size * size_factor(spec.num_gpus, total, small) if w_size else 0.0
            if w_age:
                age = now_s - submit
                p += w_age if age >= max_age else w_age * max(0.0, age) / max_age
            if w_fs:
                user = spec.user
                f = fair.get(user)
                if f is None:
                    f = fair[user] = w_fs * self._fair.factor(user, now_s)
                p += f
            keys[jid] = (-p, submit, keys[jid][2], jid)
        self._order = sorted(keys.values())
        self._bf_dirty = True

    # ------------------------------------------------------------------ decide
    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        self._gpu_types(snapshot.cluster)
        recalc = now_s >= self._next_calc_s
        if recalc:
            self._next_calc_s = now_s + self.calc_period_s
        self._sync_running(snapshot, now_s)
        # a full comparison of the pending ids at each recalculation corrects what a fast
        # path missed (on the live cluster: a job cancelled as another arrives)
        self._sync_pending(snapshot, now_s, full=recalc)
        if recalc and self._time_varying:
            self._recalculate(now_s)
        elif len(self._order) > 2 * len(self._keys) + 64:
            self._order = sorted(self._keys.values())  # drop the stale keys
        self._free_after = 0
        if not self._keys:
            return []
        free = free_map(snapshot)
        index = FreeIndex(free, self._types)
        actions: list[Action] = []
        if index.total() > 0:
            self._main_scheduler(index, now_s, actions)
            if actions:
                self._bf_dirty = True
        if (self.backfill and self._bf_dirty and now_s >= self._next_bf_s - _EPS
                and index.total() > 0):
            self._backfill(free, index, now_s, actions)
            self._next_bf_s = now_s + self.bf_interval_s
            self._bf_dirty = False
        self._free_after = index.total()
        return actions

    def _main_scheduler(self, index: FreeIndex, now_s: float, actions: list[Action]) -> None:
        """Start jobs in priority order while they fit; stop at the first that does not."""
        order, keys, specs = self._order, self._keys, self._specs
        i = 0
        while i < len(order):
            key = order[i]
            jid = key[3]
            if keys.get(jid) is not key:
                i += 1
                continue
            spec = specs[jid]
            placement = index.consolidated(spec.num_gpus, spec.gpu_type)
            if placement is None:
                break
            actions.append(Start(job_id=jid, placement=placement, reason="priority order"))
            self._forget_pending(jid)
            self._track(spec, slots_of(placement, self._types),
                        now_s + self.time_limit_s(spec), now_s)
            i += 1
        del order[:i]  # started and stale keys at the head

    def _backfill(self, free: dict[str, list[int]], index: FreeIndex, now_s: float,
                  actions: list[Action]) -> None:
        """One sched/backfill pass (EASY: one reservation; see the module docstring)."""
        planner = Planner(free, self._types, list(self._running.values()), now_s,
                          self.bf_window_s)
        keys, specs = self._keys, self._specs
        reservation: Reservation | None = None
        outside: FreeIndex | None = None  # the free GPUs less the reserved ones
        tested = 0
        for key in list(self._order):
            jid = key[3]
            if keys.get(jid) is not key:
                continue
            tested += 1
            if tested > self.bf_max_job_test or index.total() == 0:
                break
            spec = specs[jid]
            g, t = spec.num_gpus, spec.gpu_type
            end = now_s + self.time_limit_s(spec)
            if reservation is None or outside is None:
                placement = index.consolidated(g, t)
                if placement is None:
                    reservation = planner.reserve(jid, g, t)
                    if reservation is not None:
                        outside = self._without(free, reservation)
                        self._note(reservation)
                    continue
            elif end <= reservation.start_s + _EPS:
                placement = index.consolidated(g, t)  # gone before the reserved start
                if placement is None:
                    continue
                self._drop(outside, placement)
            else:
                placement = outside.consolidated(g, t)  # clear of the reserved GPUs
                if placement is None:
                    continue
                self._drop(index, placement)
            actions.append(Start(job_id=jid, placement=placement, reason="backfill"))
            self._forget_pending(jid)
            planner.add(self._track(spec, slots_of(placement, self._types), end, now_s))
        self.reservation = reservation

    def _without(self, free: dict[str, list[int]], reservation: Reservation) -> FreeIndex:
        held = reservation.slots
        rest = {n: [g for g in gs if (n, g) not in held] for n, gs in free.items()}
        return FreeIndex(rest, self._types)

    @staticmethod
    def _drop(index: FreeIndex, placement: Placement) -> None:
        """Take a placement chosen on another index out of ``index`` (where its GPUs are)."""
        for node, gpu in placement.slots():
            if gpu in index.free[node]:
                index.remove(node, gpu)

    def _note(self, reservation: Reservation) -> None:
        if self.record_reservations:
            self.reservation_log.append(reservation)

    # ------------------------------------------------------------------ timers, explain
    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        """The next backfill pass when something changed since the last one, and the next
        priority recalculation when priorities move with time; none while nothing waits or
        no GPU is free (then only an arrival or an end can change a decision)."""
        if not self._keys or self._free_after <= 0:
            return None
        times = []
        if self.backfill and self._bf_dirty and self._next_bf_s > now_s:
            times.append(self._next_bf_s)
        if self._time_varying and self._next_calc_s > now_s:
            times.append(self._next_calc_s)
        return min(times, default=None)

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        job = snapshot.by_id.get(job_id)
        if job is None or job.state is not JobState.PENDING:
            return super().explain(snapshot, job_id)
        queue = self.queue()
        if job_id not in queue:
            return super().explain(snapshot, job_id)
        rank = queue.index(job_id) + 1
        key = self._keys[job_id]
        text = (f"job {job_id} waits: priority {-key[0]:.4g}, {rank} of {len(queue)} in the "
                f"queue; it needs {job.spec.num_gpus} GPU(s), {snapshot.num_free_gpus} free")
        res = self.reservation
        if res is not None and res.job_id == job_id:
            text += f"; GPUs reserved for it from t={res.start_s:.0f}s"
        elif rank > 1 and self.backfill:
            text += "; jobs of higher priority wait: backfill starts it only where it delays "
            text += "no reservation"
        elif rank > 1:
            text += "; jobs of higher priority wait (no backfill: strict priority order)"
        return text


POLICIES: list[type[Policy]] = [SlurmBackfill]
