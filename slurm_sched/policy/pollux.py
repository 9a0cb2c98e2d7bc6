"""Pollux: goodput-optimised elastic scheduling (the SJF-BSBF paper's elastic baseline).

Paper: A. Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI'21; concrete version of spec ``sjf-bsbf.md`` section 3 (after the OSDI'21
artifact's simulator). Every ``interval_s`` (60 s) and at every arrival and completion it
re-allocates GPUs to all active jobs:

1. *Order and minimum guarantee.* Jobs are ordered by (pinned first, attained service,
   submission time, id); walking that order, each job gets one GPU while GPUs remain (a job
   without a goodput profile is rigid: it gets its requested count if that still fits, and once
   running it is pinned and never moved). Running jobs left out are preempted.
2. *Goodput-maximising spread.* The remaining GPUs maximise the power mean with ``p = -1`` of
   the running jobs' speedups (goodput on k GPUs with the best batch / goodput on one GPU,
   :mod:`slurm_sched.perf.pollux_goodput`), i.e. minimise ``sum 1 / speedup``. With
   ``speedup_base="fair"`` each speedup is relative to the job's goodput on its fair share,
   ``ceil(GPUs / active jobs)`` packed GPUs, as the OSDI'21 artifact's search poses it. A job whose
   allocation would change has its speedup multiplied by Pollux's restart penalty
   ``max(age - restarts * 30, 0) / (age + 30)``. Per-job caps: ``max_replicas =
   min(max(2 * max_profiled_replicas, 1), 64, max_batch / min_local_bsz)`` (NCF: 1).
3. *Placement.* Up to 4 GPUs go on one node (best fit), larger allocations are whole nodes, so
   at most one distributed job uses a node (Pollux's interference-avoidance constraint). Jobs
   that keep their GPU count keep their GPUs.

Actions: ``Preempt`` for jobs that lose every GPU, ``Reconfigure`` (placement + the chosen
sub-batch and accumulation steps) for elastic jobs that start or change GPU count, ``Start`` for
rigid jobs. The simulator charges the usual 30 s restart for every re-allocation.

Deviations (documented): the NSGA-II search (population 100, 100 generations, every 60 s) is
replaced by a greedy marginal-gain search over GPU counts (step 2), which takes milliseconds;
:func:`exhaustive_counts` is the reference it is measured against on small cases
(``docs/reproductions/sjf-bsbf.md``: same objective on all but a few of the random cases, and
within a small margin on those). The throughput and efficiency models are the offline fit of the
measurements the world simulates with (Pollux after its profiling has converged); the gradient
statistics are those of the job's own validation run at its requested batch, or, with
``grad_stats="current"``, those the job measures at the global batch it trains at now (what
AdaptDL reports and the OSDI'21 artifact's policy reads; a job that never ran, at the
application's initial batch). A running
job's batch size is re-chosen when its GPU count changes; with ``rebatch=True`` also at every
cycle for jobs that keep their GPUs (AdaptDL changes the batch in process; through Slurm every
change of settings is a requeue, so it is off by default; the ``pollux-artifact`` profile turns
it on together with in-place settings changes).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from slurm_sched.model import (
    Action,
    ClusterSnapshot,
    JobSettings,
    JobState,
    JobView,
    Placement,
    Preempt,
    Reconfigure,
    Start,
)
from slurm_sched.perf.pollux_goodput import (
    best_config,
    init_batch,
    max_replicas,
    replica_options,
    speedup,
)
from slurm_sched.perf.sjf_bsbf_model import JobProfile, job_profile
from slurm_sched.policy.base import Policy
from slurm_sched.policy.placement import FreeIndex, FreeMap

Slot = tuple[str, int]


@dataclass
class _Job:
    view: JobView
    profile: JobProfile | None
    current: int  # GPUs held now (0 if pending)
    fraction: float
    penalty: float  # speedup factor when its allocation changes
    limit: int  # most GPUs it may get
    base: float = 1.0  # speed-up the values are relative to (see ``speedup_base``)
    stats_batch: int | None = None  # batch its gradient statistics are read at (``grad_stats``)
    alloc: int = 0
    _values: dict[int, float] = field(default_factory=dict)

    @property
    def rigid(self) -> bool:
        return self.profile is None

    def value(self, k: int) -> float:
        """Penalised speedup on ``k`` GPUs, relative to ``base``."""
        got = self._values.get(k)
        if got is None:
            if k <= 0 or self.profile is None:
                got = 0.0
            else:
                s = speedup(self.profile, k, self.fraction, self.stats_batch) / self.base
                got = s if k == self.current else s * self.penalty
            self._values[k] = got
        return got


def objective(jobs: Sequence[_Job], counts: Sequence[int]) -> float:
    """sum over allocated jobs of 1 / penalised speedup (lower is better; p = -1)."""
    total = 0.0
    for j, k in zip(jobs, counts, strict=True):
        if k > 0 and not j.rigid:
            v = j.value(k)
            total += math.inf if v <= 0 else 1.0 / v
    return total


def greedy_counts(jobs: Sequence[_Job], free: int, options: Sequence[int]) -> list[int]:
    """Distribute ``free`` extra GPUs over jobs that already hold their guaranteed GPU.

    Repeatedly gives GPUs to the job whose best jump (to any larger allowed count) lowers
    ``sum 1 / speedup`` most per GPU; lazy heap, so a jump that no longer fits is re-evaluated.
    """
    counts = [j.alloc for j in jobs]

    def best_jump(i: int, left: int) -> tuple[float, int] | None:
        j = jobs[i]
        k = counts[i]
        if j.rigid or k <= 0:
            return None
        base = 1.0 / j.value(k) if j.value(k) > 0 else math.inf
        best: tuple[float, int] | None = None
        for k2 in options:
            if k2 <= k:
                continue
            if k2 - k > left or k2 > j.limit:
                break
            v = j.value(k2)
            if v <= 0:
                continue
            gain = (base - 1.0 / v) / (k2 - k)
            if gain > 1e-12 and (best is None or gain > best[0]):
                best = (gain, k2)
        return best

    heap: list[tuple[float, int, int]] = []
    for i in range(len(jobs)):
        bj = best_jump(i, free)
        if bj is not None:
            heap.append((-bj[0], i, bj[1]))
    heapq.heapify(heap)
    while heap and free > 0:
        _neg, i, k2 = heapq.heappop(heap)
        if k2 - counts[i] > free:
            bj = best_jump(i, free)
            if bj is not None:
                heapq.heappush(heap, (-bj[0], i, bj[1]))
            continue
        free -= k2 - counts[i]
        counts[i] = k2
        bj = best_jump(i, free)
        if bj is not None:
            heapq.heappush(heap, (-bj[0], i, bj[1]))
    return counts


def exhaustive_counts(jobs: Sequence[_Job], free: int, options: Sequence[int]) -> list[int]:
    """The optimum of the same problem by enumeration (reference for small cases only)."""
    base = [j.alloc for j in jobs]
    choices = []
    for j, k in zip(jobs, base, strict=True):
        if j.rigid or k <= 0:
            choices.append([k])
        else:
            choices.append([k] + [o for o in options if k < o <= j.limit])
    best, best_val = base, objective(jobs, base)
    for combo in itertools.product(*choices):
        extra = sum(c - k for c, k in zip(combo, base, strict=True))
        if extra > free:
            continue
        val = objective(jobs, combo)
        if val < best_val - 1e-12:
            best, best_val = list(combo), val
    return best


class Pollux(Policy):
    name = "pollux"
    paper = "Qiao et al., OSDI'21 (Pollux, goodput-optimised co-adaptive scheduling)"
    summary = ("elastic: re-allocates GPU counts and batch sizes every 60 s to maximise the "
               "power mean (p=-1) of job goodput speedups; preempts and restarts jobs")
    elastic = True
    progress_model = "sjf-bsbf"

    def __init__(self, interval_s: float = 60.0, restart_s: float = 30.0,
                 search: str = "greedy", rebatch: bool = False,
                 speedup_base: str = "one", grad_stats: str = "requested") -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        if restart_s < 0:
            raise ValueError(f"restart_s must be >= 0, got {restart_s}")
        if search not in ("greedy", "exhaustive"):
            raise ValueError(f"search must be 'greedy' or 'exhaustive', got {search!r}")
        if speedup_base not in ("one", "fair"):
            raise ValueError(f"speedup_base must be 'one' or 'fair', got {speedup_base!r}")
        if grad_stats not in ("requested", "current"):
            raise ValueError(f"grad_stats must be 'requested' or 'current', got {grad_stats!r}")
        self.interval_s = interval_s
        self.restart_s = restart_s
        self.search = search
        # what a job's speedup is measured against in the objective: one GPU (the paper's
        # speedup), or its fair share, ceil(GPUs / active jobs), as the artifact's search poses
        # it; the second weighs jobs that scale well more, the more GPUs the fair share holds
        self.speedup_base = speedup_base
        # re-pick the batch of jobs that keep their GPUs at every cycle (AdaptDL does so in
        # process; through Slurm every settings change is a requeue, hence off by default)
        self.rebatch = rebatch
        # the gradient statistics a job's goodput is predicted with: its own run's at the batch
        # it requested, or those it measures at the batch it trains at now (Pollux reads them
        # from the running job; a job that never ran, at the application's initial batch)
        self.grad_stats = grad_stats
        self._batch: dict[str, int] = {}  # global batch last set per job
        # learned state: most replicas a job has run with, and its restarts
        self._profiled: dict[str, int] = {}
        self._restarts: dict[str, int] = {}
        self._service: dict[str, float] = {}  # GPU-seconds actually held
        self._seen_s: float | None = None

    def _account(self, snapshot: ClusterSnapshot, now_s: float) -> None:
        """Attained service: GPUs held x time, accumulated between cycles."""
        if self._seen_s is not None and now_s > self._seen_s:
            dt = now_s - self._seen_s
            for v in snapshot.running:
                assert v.placement is not None
                self._service[v.job_id] = self._service.get(v.job_id, 0.0) + \
                    v.placement.num_gpus * min(dt, now_s - (v.first_start_s or now_s))
        self._seen_s = now_s
        if len(self._service) > 2 * len(snapshot.jobs) + 64:
            active = snapshot.by_id
            for d in (self._service, self._profiled, self._restarts, self._batch):
                for k in [k for k in d if k not in active]:
                    del d[k]

    # ------------------------------------------------------------------ allocation
    def _jobs(self, snapshot: ClusterSnapshot, now_s: float) -> list[_Job]:
        out = []
        active = sum(1 for v in snapshot.jobs if v.state is not JobState.SUSPENDED)
        fair = -(-snapshot.cluster.total_gpus // max(1, active))
        for v in snapshot.jobs:
            if v.state is JobState.SUSPENDED:
                continue
            prof = job_profile(v.spec)
            cur = v.placement.num_gpus if v.state is JobState.RUNNING and v.placement else 0
            frac = v.work_done_at(now_s) / v.spec.duration_s if v.spec.duration_s > 0 else 0.0
            age = max(0.0, now_s - v.spec.submit_time_s)
            restarts = self._restarts.get(v.job_id, 0)
            penalty = max(age - restarts * self.restart_s, 0.0) / (age + self.restart_s)
            if cur == 0:
                penalty = 1.0 if v.first_start_s is None else penalty
            limit = v.spec.num_gpus
            if prof is not None:
                limit = max_replicas(prof.app, self._profiled.get(v.job_id, 0))
            frac = min(max(frac, 0.0), 1.0)
            stats_batch = None
            if prof is not None and self.grad_stats == "current":
                stats_batch = self._batch.get(v.job_id, init_batch(prof.app))
            base = 1.0
            if prof is not None and self.speedup_base == "fair":
                base = speedup(prof, fair, frac, stats_batch)
            out.append(_Job(v, prof, cur, frac, penalty, limit, base, stats_batch))
        return out

    def allocate(self, snapshot: ClusterSnapshot, now_s: float) -> list[_Job]:
        """Target GPU counts (``alloc``) of every active job."""
        jobs = self._jobs(snapshot, now_s)
        total = snapshot.cluster.total_gpus

        def key(j: _Job) -> tuple[bool, float, float, str]:
            pinned = j.rigid and j.current > 0
            return (not pinned, self._service.get(j.view.job_id, 0.0),
                    j.view.spec.submit_time_s, j.view.job_id)

        left = total
        for j in sorted(jobs, key=key):
            need = j.view.spec.num_gpus if j.rigid else 1
            if need <= left:
                j.alloc = need
                left -= need
        options = replica_options(total, snapshot.cluster.max_gpus_per_node or 1)
        search = exhaustive_counts if self.search == "exhaustive" else greedy_counts
        counts = search(jobs, left, options)
        for j, k in zip(jobs, counts, strict=True):
            j.alloc = k
        return jobs

    # ------------------------------------------------------------------ placement
    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        if not snapshot.jobs:
            return []
        self._account(snapshot, now_s)
        jobs = self.allocate(snapshot, now_s)
        free: FreeMap = {n.name: list(range(n.num_gpus)) for n in snapshot.cluster.nodes}
        held = {v.job_id: v for v in snapshot.jobs if v.state is JobState.SUSPENDED}
        for v in held.values():  # suspended jobs keep their GPUs (Pollux never suspends)
            assert v.placement is not None
            for node, g in v.placement.slots():
                if g in free[node]:
                    free[node].remove(g)
        keep: dict[str, Placement] = {}
        for j in jobs:  # jobs keeping their count keep their GPUs
            if j.current > 0 and j.alloc == j.current:
                assert j.view.placement is not None
                keep[j.view.job_id] = j.view.placement
                for node, g in j.view.placement.slots():
                    free[node].remove(g)
        targets: dict[str, Placement] = {}
        movers = sorted((j for j in jobs if j.alloc > 0 and j.view.job_id not in keep),
                        key=lambda j: (-j.alloc, j.view.job_id))
        gpn = snapshot.cluster.max_gpus_per_node or 1
        options = replica_options(snapshot.cluster.total_gpus, gpn)
        # free GPUs indexed by count (thousands of movers on thousands of nodes); from here on
        # ``free`` changes only through it
        index = FreeIndex(free, {n.name: n.gpu_type for n in snapshot.cluster.nodes})
        for j in movers:
            if j.rigid:
                p = index.consolidated(j.alloc)
            else:  # fragmented: the largest allowed count that can still be placed
                p = None
                for k in [j.alloc] + [o for o in reversed(options) if o < j.alloc]:
                    p = self._place(index, k, gpn)
                    if p is not None:
                        break
            if p is not None:
                if p == j.view.placement:  # landed on its own GPUs: nothing to restart
                    keep[j.view.job_id] = p
                else:
                    targets[j.view.job_id] = p
        return self._actions(jobs, keep, targets, now_s)

    @staticmethod
    def _place(index: FreeIndex, k: int, gpn: int) -> Placement | None:
        """Up to one node's worth on a single node (best fit: the fewest free GPUs, then
        cluster order), more as whole free nodes (cluster order)."""
        if k <= 0:
            return None
        free = index.free
        if k <= gpn:
            node = index.best_fit_node(k)
            if node is None:
                return None
            return index.take({node: free[node][:k]})
        if k % gpn:
            return None
        whole = index.nodes_with(gpn, k // gpn)
        if len(whole) < k // gpn:
            return None
        return index.take({n: list(free[n]) for n in whole})

    def _actions(self, jobs: list[_Job], keep: dict[str, Placement],
                 targets: dict[str, Placement], now_s: float) -> list[Action]:
        actions: list[Action] = []
        moving: list[tuple[_Job, Placement]] = []
        for j in jobs:
            jid = j.view.job_id
            if jid in keep:
                if self.rebatch and not j.rigid:
                    actions.extend(self._rebatch(j, keep[jid]))
                continue
            target = targets.get(jid)
            if j.current > 0 and target is None:
                if j.rigid:
                    continue  # pinned (cannot happen: rigid running jobs keep their count)
                actions.append(Preempt(job_id=jid, reason="pollux: no GPU in this allocation"))
            elif target is not None:
                moving.append((j, target))
        # running jobs that move: release first so no target overlaps a GPU still held
        order = self._move_order([(j, t) for j, t in moving if j.current > 0])
        cyclic = [(j, t) for j, t, via_preempt in order if via_preempt]
        for j, target, via_preempt in order:
            if not via_preempt:
                actions.append(self._start(j, target, now_s))
        for j, _ in cyclic:  # release every GPU of a cycle before any of them restarts
            actions.append(Preempt(job_id=j.view.job_id, reason="pollux: re-allocate"))
        for j, target in cyclic:
            actions.append(self._start(j, target, now_s))
        for j, target in moving:
            if j.current == 0:
                actions.append(self._start(j, target, now_s))
        return actions

    def _move_order(self, moving: list[tuple[_Job, Placement]]
                    ) -> list[tuple[_Job, Placement, bool]]:
        """Order re-allocations so each target is free when applied; cycles go via Preempt."""
        held: dict[Slot, str] = {}
        for j, _ in moving:
            assert j.view.placement is not None
            for s in j.view.placement.slots():
                held[s] = j.view.job_id
        out: list[tuple[_Job, Placement, bool]] = []
        todo = list(moving)
        while todo:
            progressed = False
            rest = []
            for j, t in todo:
                jid = j.view.job_id
                if all(held.get(s, jid) == jid for s in t.slots()):
                    for s in [s for s, h in held.items() if h == jid]:
                        del held[s]
                    for s in t.slots():
                        held[s] = jid
                    out.append((j, t, False))
                    progressed = True
                else:
                    rest.append((j, t))
            todo = rest
            if not progressed:
                # a cycle: preempt the remaining ones first, then start them
                for j, _ in todo:
                    for s in [s for s, h in held.items() if h == j.view.job_id]:
                        del held[s]
                out.extend((j, t, True) for j, t in todo)
                break
        return out

    def _start(self, j: _Job, target: Placement, now_s: float) -> Action:
        jid = j.view.job_id
        if j.rigid:
            return Start(job_id=jid, placement=target, reason="pollux: rigid job")
        k = target.num_gpus
        batch, settings = self._best_settings(j, target)
        if j.current > 0 or j.view.first_start_s is not None:
            self._restarts[jid] = self._restarts.get(jid, 0) + 1
        self._profiled[jid] = max(self._profiled.get(jid, 0), k)
        self._batch[jid] = batch
        return Reconfigure(job_id=jid, placement=target, settings=settings,
                           reason=f"pollux: {k} GPU(s), batch {batch}")

    @staticmethod
    def _best_settings(j: _Job, placement: Placement) -> tuple[int, JobSettings]:
        """The goodput-maximising global batch of elastic ``j`` on ``placement``, and the
        sub-batch and accumulation steps that make it."""
        assert j.profile is not None
        cfg = best_config(j.profile, placement.num_gpus, j.fraction, nodes=len(placement.parts),
                          stats_batch=j.stats_batch)
        return cfg.global_batch, JobSettings(accumulation_steps=cfg.steps,
                                             sub_batch_size=cfg.sub_batch)

    def _rebatch(self, j: _Job, placement: Placement) -> list[Action]:
        """A ``Reconfigure`` to the same GPUs when the best batch there has changed."""
        batch, settings = self._best_settings(j, placement)
        now = j.view.settings
        if (now.accumulation_steps, now.sub_batch_size) == (
                settings.accumulation_steps, settings.sub_batch_size):
            return []
        self._batch[j.view.job_id] = batch
        return [Reconfigure(job_id=j.view.job_id, placement=placement, settings=settings,
                            reason=f"pollux: batch {batch} on the same GPUs")]

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        if not snapshot.jobs:
            return None
        return now_s + self.interval_s

    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        base = super().explain(snapshot, job_id)
        job = snapshot.by_id.get(job_id)
        if job is None or job_profile(job.spec) is None:
            return base + " (rigid: no goodput profile)"
        return base + f"; profiled up to {self._profiled.get(job_id, 0)} GPU(s)"


POLICIES: list[type[Policy]] = [Pollux]
