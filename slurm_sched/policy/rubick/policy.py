"""Rubick: slope-greedy GPU/CPU allocation with reconfigurable execution plans.

Paper: Zhang et al., "Rubick: Exploiting Job Reconfigurability for Deep Learning Cluster
Scheduling" (arXiv; MLSys'25 as Morphling), Algorithm 1 and §5. Spec ``shared/specs/rubick.md``
§3 (numbers in brackets below are its sections).

Every scheduling pass (on each arrival and completion, and every 60 s [3.9]):

1. Each job's **resource sensitivity curve** [3.2] is computed from the performance model
   (:mod:`slurm_sched.perf.rubick`): for every GPU count, the best normalised throughput
   ``S = TP / TP_ref`` over all feasible (plan, placement shape) pairs, made monotone with the
   1% flatness rule; ``TP_ref`` is the job's own requested configuration [1.5, A3, A14].
2. **Guaranteed** jobs get a minimum demand ``minRes`` [3.4]: the fewest GPUs (then CPUs) whose
   best plan is predicted at least as fast as the request with the original plan. Queued
   guaranteed jobs within their tenant's quota (charged at ``minRes``) are scheduled first,
   FIFO [Alg. 1 L2-3]; best-effort jobs have ``minRes = 0``.
3. Then queued best-effort jobs and all running jobs, sorted by GPU slope then CPU slope
   (starving jobs first) [L5], each run ``SCHEDULE_JOB``: walk the nodes (its own first, then
   the most free) taking free GPUs up to its saturation point ``cap`` [A1]; on each node take
   GPUs from the job with the lowest down-slope over its own minimum while the receiver's
   up-slope is higher, or the receiver is below its minimum [L13-21]. Shrinking a best-effort
   job to nothing preempts it. The job then gets the best (plan, shape) that fits what it
   gathered [L29, 3.6], CPUs by the same slope rule, and host memory for the plan (AllocMem:
   the next-best plan if memory is short [A6]); otherwise everything is rolled back [L35].
4. A running job is reconfigured (checkpoint, restart with the new plan and resources) only if
   ``(T - N delta) / T > 0.97`` [3.8]: T = time since its first start, N = reconfigurations so
   far (``lock_rule="past"``; ``"inclusive"`` counts the one considered too), delta = restart
   cost. Jobs failing the test are locked for the pass (neither grown nor
   shrunk), except that a locked best-effort job may be preempted for a guaranteed job's
   minimum [A8].

Decisions become ``Reconfigure(placement, JobSettings(plan, cpus, mem_gb, accumulation_steps,
sub_batch_size))`` (it also starts a pending job on any GPU count), ``Start`` for jobs of unknown
models (they are rigid: requested GPUs, submitted plan) and ``Preempt``.

Deviations and readings (details and evidence in ``docs/reproductions/rubick.md``):

- Plan space and feasibility: a (plan, placement) is feasible iff the authors measured it (the
  measured tables stand in for the framework's memory estimator); multi-node jobs use the same
  GPU count on every node [3.5 R]. Models without tables use :func:`enumerate_plans`.
- Slopes use rates to the next valid point [A2]; a donor's loss is evaluated on its actual
  step-down configuration on its own nodes (a whole step is released at once), and only the
  GPUs the receiver finally uses are taken (donors not needed are left alone).
- Within one pass a job that shrank does not grow again [R]; a donor counts as shrunk only once
  a receiver commits its step (the walk's steals are tentative).
- A running job changes configuration only if its predicted speed improves by more than the
  flatness tolerance (1%).
- Rubick-E / Rubick-N never preempt (every Base-trace job is best effort) [4.4 R].
- ``sla_margin`` (default 0, paper mode) relaxes the guarantee test; the artifact used 1.5x.
- Options for calibrating against the artifact simulator (spec 3.11), all off by default:
  ``online_fit=False`` (its ``--online-model-fitting 0``), ``slope_order="ascending"`` (its
  sort), ``steal=False`` (its donor loop never runs).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from slurm_sched.model import (
    AS_SUBMITTED,
    Action,
    Cluster,
    ClusterSnapshot,
    JobSettings,
    JobState,
    JobView,
    Preempt,
    Reconfigure,
    Start,
)
from slurm_sched.perf.rubick.job_info import JobInfo, job_info
from slurm_sched.perf.rubick.measured import MeasuredCatalog, measured_catalog
from slurm_sched.perf.rubick.memory import accumulation_steps, enumerate_plans, host_memory_gb
from slurm_sched.perf.rubick.models import ModelSpec
from slurm_sched.perf.rubick.plans import Plan, plan_order
from slurm_sched.perf.rubick.predictors import FittedPredictor, OraclePredictor, Predictor, cpu_key
from slurm_sched.perf.rubick.shapes import Shape, shape_of
from slurm_sched.perf.rubick.world_speed import observed_iter_time_s
from slurm_sched.policy.base import Policy
from slurm_sched.policy.rubick.allocations import Alloc, NodeState, SlotHolds, State
from slurm_sched.policy.rubick.candidates import Cand, JobModel
from slurm_sched.policy.rubick.curves import (
    EPS_FLAT,
    curve_model,
    fits_cluster,
    rigid_model,
    same_family,
    split_largest_first,
)
from slurm_sched.policy.rubick.embedding import embed, embed_free, in_flatness_order

RESTART_COST_S = 78.0  # delta: measured average reconfiguration cost [P §7.3]
RECONF_THRESHOLD = 0.97  # (T - N delta) / T must exceed this [P §5.2]
STARVE_S = 200_000.0  # queueing delay after which a best-effort job is starving [X, A7]
ROUND_S = 60.0  # periodic pass [R 3.9]
MIN_OBS_ITERATIONS = 100  # below this the trace's duration/steps is too coarse to observe
SMALL_CLUSTER = 64  # nodes up to which the walk visits every node (no array skipping)
_MISS = object()  # cache miss marker (None is a cached answer)

#: A memo key made of a job's or a node's mixed parts (models, plans, counts, versions).
_Key = tuple[Any, ...]
#: A donor's answer: its job id, (its shrunk candidate or None for a preemption, {node: GPUs
#: kept}), and its loss per GPU.
_Donor = tuple[str, tuple[Cand | None, dict[str, int]], float]


@dataclass
class _Job:
    view: JobView
    jm: JobModel
    guaranteed: bool
    min_gpus: int
    min_cpg: int  # CPU floor per GPU
    locked: bool
    starving: bool
    #: ``view.job_id``, a plain attribute (read hundreds of thousands of times a pass)
    jid: str
    #: gave GPUs to another job in this pass (committed steals only): it does not grow again
    shrank: bool = False


class Rubick(Policy):
    name = "rubick"
    paper = "Zhang et al., Rubick (arXiv 2024; MLSys'25 as Morphling)"
    summary = ("reconfigures execution plans (DP/TP/PP/ZeRO/offload/GA/GC) and GPU/CPU/memory "
               "by the slopes of model-predicted sensitivity curves; guarantees SLA jobs")
    elastic = True
    progress_model = "rubick"

    def __init__(
        self,
        *,
        variant: str = "full",
        predictor: str | Predictor = "fitted",
        restart_cost_s: float = RESTART_COST_S,
        reconf_threshold: float = RECONF_THRESHOLD,
        starve_s: float = STARVE_S,
        quotas: dict[str, int] | None = None,
        sla_margin: float = 0.0,
        round_s: float = ROUND_S,
        catalog: MeasuredCatalog | None = None,
        lock_rule: str = "past",
        online_fit: bool = True,
        slope_order: str = "descending",
        steal: bool = True,
    ) -> None:
        if lock_rule not in ("past", "inclusive"):
            raise ValueError(f"lock_rule must be 'past' or 'inclusive', got {lock_rule!r}")
        self.lock_rule = lock_rule
        #: running jobs report iteration times to the predictor, which refits [P §4.3]; off: the
        #: predictor keeps its offline fit (as the artifact's ``--online-model-fitting 0``)
        self.online_fit = online_fit
        if slope_order not in ("descending", "ascending"):
            raise ValueError(
                f"slope_order must be 'descending' or 'ascending', got {slope_order!r}")
        #: SORT_BY_SLOPE's direction [A15]: the paper's most sensitive jobs first; "ascending"
        #: is the artifact simulator's order (least sensitive first, spec 3.11 item 1)
        self._slope_sign = -1.0 if slope_order == "descending" else 1.0
        self.slope_order = slope_order
        #: best-effort receivers take GPUs from donors (L13-21); False: free GPUs only, as the
        #: artifact simulator, whose donor loop never runs (spec 3.11 item 3). Privileged
        #: (guaranteed) jobs still take from donors.
        self.steal = steal
        if variant not in ("full", "E", "R", "N"):
            raise ValueError(f"variant must be full, E, R or N, got {variant!r}")
        if not 0 <= sla_margin < 1:
            raise ValueError(f"sla_margin must be in [0, 1), got {sla_margin}")
        self.variant = variant
        if isinstance(predictor, str):
            if predictor == "fitted":
                predictor = FittedPredictor()
            elif predictor == "fitted-components":  # the artifact's three-term fit loss
                predictor = FittedPredictor(loss="components")
            elif predictor == "oracle":
                predictor = OraclePredictor(catalog)
            else:
                raise ValueError("predictor must be 'fitted', 'fitted-components' or 'oracle', "
                                 f"got {predictor!r}")
        self.predictor: Predictor = predictor
        #: predictions depend on the model's name only (see :meth:`_time`)
        self._name_keyed = type(predictor) in (FittedPredictor, OraclePredictor)
        self.restart_cost_s = restart_cost_s
        self.reconf_threshold = reconf_threshold
        self.starve_s = starve_s
        self.quotas = dict(quotas or {})
        self.sla_margin = sla_margin
        self.round_s = round_s
        self.catalog = catalog or measured_catalog()
        # learned state
        self._infos: dict[str, JobInfo | None] = {}
        self._info_memo: dict[_Key, JobInfo | None] = {}  # job_info's, by job kind
        self._models: dict[str, JobModel] = {}
        self._times: dict[_Key, dict[tuple[Plan, Shape], float | None]] = {}
        self._reconfs: dict[str, int] = {}
        self._minres: dict[str, tuple[int, int]] = {}  # job -> (gpus, cpg) of the last pass
        #: Reallocations of the last pass: (receiver, donor, sigma+, sigma-, receiver urgent)
        self.moves: list[tuple[str, str, float, float, bool]] = []
        self._step_cache: dict[_Key, _Key | None] = {}
        self._step_by_kind: dict[_Key, _Key | None] = {}  # one-node donors (_step_down)
        self._donor_cache: dict[_Key, _Key | None] = {}
        self._donor_content: dict[_Key, _Key | None] = {}  # the same by node content
        self._cpu_memo: dict[_Key, int] = {}  # _choose_cpus of the pass
        #: queued jobs of the pass that got nothing, by what decided it (see _schedule_job)
        self._failed: set[_Key] = set()
        # JobModels by their inputs (pure functions of the job's info, the predictor version
        # and the cluster): jobs of one kind share one (thousands of jobs, a few hundred kinds)
        self._shared_models: dict[_Key, tuple[JobInfo | None, JobModel]] = {}
        self._shared_cluster: object = None
        self._shared_cands: dict[JobInfo, list[Cand]] = {}  # same cluster as the models
        #: the models by request alone (tenant and class cleared) and predictor version
        self._shared_curves: dict[tuple[JobInfo, int], JobModel] = {}
        self._sizes_memo: tuple[Cluster, list[int], int | None] | None = None
        #: Locked jobs reconfigured in the last pass to honour a guarantee [A8]
        self.overrides: set[str] = set()
        #: Jobs that gave GPUs to another job in the last pass (the donors of ``moves``)
        self.shrunk: set[str] = set()
        #: Scheduling class of each job in the last pass (True = guaranteed)
        self.guaranteed: dict[str, bool] = {}
        self.last_assigned: dict[str, tuple[Cand, int, float]] = {}  # job -> (cand, cpg, S)

    # ------------------------------------------------------------------ model access
    def info(self, view: JobView) -> JobInfo | None:
        jid = view.job_id
        if jid not in self._infos:
            if len(self._info_memo) > 65_536:
                self._info_memo.clear()
            self._infos[jid] = job_info(view.spec, self._info_memo)
        return self._infos[jid]

    def _time(self, model: ModelSpec, plan: Plan, shape: Shape, cpg: float) -> float | None:
        """Predicted iteration time, cached per (model, CPUs per GPU, model version); a miss
        predicts every measured configuration of the model at once (vectorised).

        The built-in predictors' answers depend on the model's name only (the fitted one keeps
        one performance model per name, made on first use; the oracle reads the tables by name),
        so for them jobs of one model with different global batches share one table."""
        mkey: object = model.name if self._name_keyed else model
        key = (mkey, float(cpg), self.predictor.model_version(model.name))
        table = self._times.get(key)
        if table is None:
            if len(self._times) > 512:
                self._times.clear()
            table = self._times[key] = {}
            pairs = [(p, s) for p, s, _ in self.catalog.configs(model.name)]
            if pairs:
                table.update(zip(pairs, self.predictor.iter_times_s(model, pairs, cpg),
                                 strict=True))
        ck = (plan, shape)
        t = table.get(ck, _MISS)
        if t is _MISS:
            t = table[ck] = self.predictor.iter_time_s(model, plan, shape, cpg)
        return t  # type: ignore[return-value]

    def speed(self, info: JobInfo, cand: Cand, cpg: float, t_ref: float) -> float:
        if cand.plan is None or cand.shape is None:
            return 1.0
        t = self._time(info.model, cand.plan, cand.shape, cpg)
        return 0.0 if t is None or t <= 0 else t_ref / t

    def t_ref(self, info: JobInfo, cpg: float | None = None) -> float:
        """Predicted iteration time of the requested configuration (TP^SLA = b / this)."""
        t = self._time(info.model, info.orig_plan, info.ref_shape,
                       info.req_cpus_per_gpu if cpg is None else cpg)
        if t is None:  # the request itself is not in the plan space: use the model's best
            t = self._time(info.model, Plan("dp"), info.ref_shape, info.req_cpus_per_gpu)
        return t if t and t > 0 else 1.0

    def _sizes(self, cluster: Cluster) -> list[int]:
        """GPUs per node, largest first (memoised per cluster: asked per job kind)."""
        got = self._sizes_memo
        if got is None or got[0] is not cluster:
            got = self._sizes_memo = (cluster, sorted(
                (n.num_gpus for n in cluster.nodes if n.num_gpus), reverse=True), min(
                (n.cpus // max(1, n.num_gpus) for n in cluster.nodes if n.num_gpus),
                default=None))
        return got[1]

    def _candidates(self, info: JobInfo, snapshot: ClusterSnapshot) -> list[Cand]:
        sizes = self._sizes(snapshot.cluster)
        model = info.model
        if self.catalog.rows.get(model.name):
            pairs = [(p, s) for p, s, _ in self.catalog.configs(model.name)]
        else:
            pairs = []
            for k in range(1, (sizes[0] if sizes else 0) + 1):
                for n in range(1, len(sizes) + 1):
                    shape = (k,) * n
                    pairs.extend((p, shape) for p in enumerate_plans(model, shape))
        out: list[Cand] = []
        orig = info.orig_plan
        for plan, shape in pairs:
            if len(set(shape)) != 1:
                continue  # uniform shapes only [3.5 R]
            if plan.is_3d and not model.allow_3d and plan != orig:
                continue  # TP/PP disabled for the small models in the traces [P §7.3]
            if info.allowed is not None and plan.code not in info.allowed and plan != orig:
                continue
            if not fits_cluster(shape, sizes):
                continue
            g = sum(shape)
            if self.variant in ("E", "N") and g != info.req_gpus:
                continue
            if self.variant == "N" and plan != orig:
                continue
            if self.variant == "R" and not same_family(plan, orig):
                continue
            out.append(Cand(plan, shape, g))
        ref = Cand(orig, info.ref_shape, info.req_gpus)
        if ref not in out and fits_cluster(info.ref_shape, sizes) and len(
                set(info.ref_shape)) == 1:
            out.append(ref)
        return sorted(set(out), key=lambda c: (
            c.gpus, c.shape, plan_order(c.plan) if c.plan is not None else 0, c.plan))

    def job_model(self, view: JobView, snapshot: ClusterSnapshot) -> JobModel:
        jid = view.job_id
        jm = self._models.get(jid)
        info = self.info(view)
        version = self.predictor.model_version(info.model.name) if info else 0
        if jm is not None and jm.version == version:
            return jm
        cluster = snapshot.cluster
        if cluster is not self._shared_cluster:
            if cluster != self._shared_cluster:
                self._shared_models.clear()
                self._shared_curves.clear()
                self._shared_cands.clear()
            self._shared_cluster = cluster
        key: _Key = (info, version) if info is not None else (view.spec.num_gpus, version)
        shared = self._shared_models.get(key)
        if shared is not None:
            if info is not None:
                self._infos[jid] = shared[0]
            jm = shared[1]
            self._models[jid] = jm
            return jm
        total = cluster.total_gpus
        fitted: JobInfo | None = None
        if info is None:
            jm = rigid_model(view.spec.num_gpus, total, version)
        else:
            self._sizes(cluster)
            min_cpn = self._sizes_memo[2] if self._sizes_memo else None
            c_curve = max(1, min(round(info.req_cpus_per_gpu),
                                 min_cpn if min_cpn is not None else 1))
            fitted = self._fit_request(info, snapshot)
            # The curve (candidates, speeds, cap) is the same for every tenant and class: jobs
            # of one request that differ only there share it and keep their own info.
            ckey = (replace(fitted, guaranteed=False, tenant=""), version)
            base = self._shared_curves.get(ckey)
            if base is None:
                base = self._shared_curves[ckey] = self._new_model(
                    fitted, snapshot, view.spec.num_gpus, c_curve, total, version)
            if base.info is None:
                jm, fitted = base, None  # nothing of the plan space fits: treat as rigid
            else:
                jm = replace(base, info=fitted)  # (the memos are shared too: pure functions)
            self._infos[jid] = fitted
        if len(self._shared_models) > 65_536:
            self._shared_models.clear()
            self._shared_curves.clear()
        self._shared_models[key] = (fitted, jm)
        self._models[jid] = jm
        return jm

    def _new_model(self, fitted: JobInfo, snapshot: ClusterSnapshot, req_gpus: int,
                   c_curve: float, total: int, version: int) -> JobModel:
        """The job model of a fitted request (a rigid one when none of its plan space fits)."""
        t_ref = self.t_ref(fitted)
        # the candidates do not depend on the predictor: kept across model versions
        cands = self._shared_cands.get(fitted)
        if cands is None:
            if len(self._shared_cands) > 65_536:
                self._shared_cands.clear()
            cands = self._shared_cands[fitted] = self._candidates(fitted, snapshot)
        speed = {c: self.speed(fitted, c, c_curve, t_ref) for c in cands}
        cands = [c for c in cands if speed[c] > 0]
        if not cands:
            return rigid_model(req_gpus, total, version)
        return curve_model(fitted, cands, speed, total, c_curve, t_ref, version)

    def _fit_request(self, info: JobInfo, snapshot: ClusterSnapshot) -> JobInfo:
        """The requested configuration as this cluster can hold it: the fastest measured
        placement of the original plan with the requested GPUs that fits the nodes; failing
        that, the job's fastest fitting configuration with at most the requested GPUs (the
        reference of its normalised throughput and of its guarantee)."""
        sizes = self._sizes(snapshot.cluster)
        if fits_cluster(info.ref_shape, sizes):
            return info
        rows = self.catalog.configs(info.model.name)
        same = sorted((t, s) for p, s, t in rows if p == info.orig_plan
                      and sum(s) == info.req_gpus and len(set(s)) == 1
                      and fits_cluster(s, sizes))
        if same:
            return replace(info, ref_shape=same[0][1])
        other = sorted((-sum(s), t, s, plan_order(p), p) for p, s, t in rows
                       if sum(s) <= info.req_gpus and len(set(s)) == 1
                       and fits_cluster(s, sizes))
        if other:
            _, _, shape, _, plan = other[0]
            return replace(info, orig_plan=plan, ref_shape=shape)
        return replace(info, ref_shape=tuple(sorted(
            split_largest_first(info.req_gpus, sizes), reverse=True)))

    # ------------------------------------------------------------------ helpers
    def _locked(self, view: JobView, now_s: float) -> bool:
        """The reconfiguration rule [3.8]: (T - N delta) / T > threshold to reconfigure.

        ``lock_rule="past"`` (default, the paper's "N is the reconfiguration times"): N counts
        the job's past reconfigurations, so the first one is always allowed; ``"inclusive"``:
        N also counts the one being considered (after any restart the job's overhead stays
        under 1 - threshold of its time)."""
        if view.state is not JobState.RUNNING or view.first_start_s is None:
            return False
        n = self._reconfs.get(view.job_id, 0) + (1 if self.lock_rule == "inclusive" else 0)
        if n == 0:
            return False
        t = now_s - view.first_start_s
        if t <= 0:
            return True
        return (t - n * self.restart_cost_s) / t <= self.reconf_threshold

    def _min_res(self, info: JobInfo, jm: JobModel) -> tuple[int, int]:
        """MIN_RES [3.4]: fewest GPUs, then CPUs per GPU, predicted >= TP^SLA, within the
        request; else the request itself. ``info`` is ``jm.info`` (memoised on the model)."""
        got = jm._min_res_memo.get(self.sla_margin)
        if got is None:
            got = jm._min_res_memo[self.sla_margin] = self._min_res_uncached(info, jm)
        return got

    def _min_res_uncached(self, info: JobInfo, jm: JobModel) -> tuple[int, int]:
        target = 1.0 - self.sla_margin
        req_c = max(1, round(info.req_cpus_per_gpu))
        for g in range(1, info.req_gpus + 1):
            cands = [c for c in jm.cands if c.gpus == g]
            if not cands:
                continue
            for cpg in range(1, req_c + 1):
                if any(self.speed(info, c, cpg, jm.t_ref) >= target - 1e-9 for c in cands):
                    return g, cpg
        return info.req_gpus, req_c

    def _cur_cand(self, view: JobView, jm: JobModel) -> tuple[Cand, int]:
        info = jm.info
        p = view.placement
        assert p is not None
        g = p.num_gpus
        cpg = (view.settings.cpus // g) if view.settings.cpus else (
            round(info.req_cpus_per_gpu) if info else 1)
        if info is None:
            return Cand(None, None, g), max(1, cpg)
        plan = info.orig_plan
        if view.settings.plan:
            try:
                plan = Plan.parse(view.settings.plan, g)
            except ValueError:
                plan = info.orig_plan
        return Cand(plan, shape_of(p), g), max(1, cpg)

    # ------------------------------------------------------------------ decide
    def decide(self, snapshot: ClusterSnapshot, now_s: float) -> list[Action]:
        self.moves = []
        self.overrides = set()
        self._step_cache = {}
        self._step_by_kind = {}
        self._donor_cache = {}
        self._donor_content = {}
        self._cpu_memo = {}
        self._failed.clear()
        if self.online_fit:
            self._observe(snapshot, now_s)
        if not snapshot.jobs:
            return []
        state = self._build_state(snapshot)
        jobs: dict[str, _Job] = {}
        total_gpus = snapshot.cluster.total_gpus
        running, pending = JobState.RUNNING, JobState.PENDING
        for view in snapshot.jobs:
            st = view.state
            if st is JobState.SUSPENDED:
                continue  # Rubick never suspends; leave such jobs alone
            jid = view.spec.job_id
            jm = self.job_model(view, snapshot)
            info = jm.info
            guaranteed = bool(info and info.guaranteed)
            min_g, min_c = 0, 1
            if guaranteed and info is not None:
                min_g, min_c = self._minres[jid] = self._min_res(info, jm)
                if min_g > self.quotas.get(view.spec.user, total_gpus):
                    # its minimum never fits the tenant's quota: it could never be privileged,
                    # so it runs as best effort rather than never [R, liveness]
                    guaranteed, min_g, min_c = False, 0, 1
            self.guaranteed[jid] = guaranteed
            starving = (st is pending and not guaranteed
                        and now_s - view.spec.submit_time_s >= self.starve_s)
            locked = st is running and self._locked(view, now_s)
            jobs[jid] = _Job(view, jm, guaranteed, min_g, min_c, locked, starving, jid)
        before = dict(state.alloc)
        self._schedule(snapshot, state, jobs, now_s)
        self.shrunk = {jid for jid, j in jobs.items() if j.shrank}
        return self._actions(snapshot, state, before, jobs)

    def next_wakeup_s(self, snapshot: ClusterSnapshot, now_s: float) -> float | None:
        if not snapshot.jobs:
            return None
        return now_s + self.round_s

    # ------------------------------------------------------------------ observation
    def _observe(self, snapshot: ClusterSnapshot, now_s: float) -> None:
        """Running jobs report iteration times; refit models that disagree [P §4.3].

        The reports of one configuration (as the predictor files them) are merged into their
        median before the predictor sees them: jobs running one configuration at different
        speeds would otherwise overwrite each other in snapshot order, and every pass over an
        unchanged cluster would then refit the model (and rebuild the curves of its jobs)."""
        reports: dict[_Key, tuple[ModelSpec, Plan, Shape, float, list[float]]] = {}
        for view in snapshot.running:
            info = self.info(view)
            if info is None or (view.spec.iterations or 0) < MIN_OBS_ITERATIONS:
                continue
            t = observed_iter_time_s(view, now_s)
            if t is None:
                continue
            # (a job running since before this scheduler started, e.g. after a restart of the
            # daemon, reports in the first pass too: its model is built here)
            jm = self.job_model(view, snapshot)
            if jm.rigid:
                continue
            cand, cpg = self._cur_cand(view, jm)
            if cand.plan is None or cand.shape is None:
                continue
            key = (info.model.name, cand.plan, cand.shape, cpu_key(cand.plan, cpg))
            got = reports.get(key)
            if got is None:
                reports[key] = (info.model, cand.plan, cand.shape, float(cpg), [t])
            else:
                got[4].append(t)
        for model, plan, shape, cpgf, times in reports.values():
            self.predictor.observe(model, plan, shape, cpgf, statistics.median(times))
        refit = getattr(self.predictor, "refit_pending", None)
        if refit is not None:
            refit()

    # ------------------------------------------------------------------ state
    def _build_state(self, snapshot: ClusterSnapshot) -> State:
        nodes = [
            NodeState(n.name, n.num_gpus, n.cpus, n.mem_gb, set(range(n.num_gpus)), n.cpus,
                      n.mem_gb)
            for n in snapshot.cluster.nodes
        ]
        state = State(nodes)
        for view in snapshot.jobs:
            if view.placement is None or view.state is JobState.PENDING:
                continue
            jm = self.job_model(view, snapshot)
            if jm.rigid:
                cand, cpg = Cand(None, None, view.placement.num_gpus), 1
            else:
                cand, cpg = self._cur_cand(view, jm)
            alloc = self._make_alloc(snapshot, jm, cand, cpg,
                                     {p.node: p.gpus for p in view.placement.parts}, view)
            # Running jobs are where the backend says they are, even over our own CPU/memory
            # bookkeeping (e.g. started by another policy): clamp instead of failing.
            state.set(view.job_id, alloc, record=False)
        state.journal.clear()
        return state

    def _make_alloc(self, snapshot: ClusterSnapshot, jm: JobModel, cand: Cand, cpg: int,
                    gpus: Mapping[str, Iterable[int]], view: JobView) -> Alloc:
        by_name = snapshot.cluster.by_name
        parts = tuple((n, tuple(sorted(g))) for n, g in gpus.items())
        total = sum(len(g) for _, g in parts)
        cpus = []
        mem = []
        info = jm.info
        for n, g in parts:
            node = by_name[n]
            if info is None:
                req = view.spec.num_cpus or total
                c = min(node.cpus, max(1, math.ceil(req * len(g) / total)))
                m = 0.0
            else:
                c = min(node.cpus, cpg * len(g))
                plan = cand.plan or info.orig_plan
                m = min(node.mem_gb, host_memory_gb(info.model, plan, len(g), total))
            cpus.append((n, c))
            mem.append((n, m))
        return Alloc(parts, tuple(cpus), tuple(mem), cand, cpg)

    def _speed_alloc(self, jm: JobModel, a: Alloc) -> float:
        if jm.info is None:
            return 1.0
        return self.speed(jm.info, a.cand, a.cpus_per_gpu, jm.t_ref)

    # ------------------------------------------------------------------ Algorithm 1
    def _schedule(self, snapshot: ClusterSnapshot, state: State, jobs: dict[str, _Job],
                  now_s: float) -> None:
        # L1-3: privileged guaranteed jobs, FIFO, quota charged at minRes.
        used: dict[str, int] = {}
        for j in jobs.values():
            if j.guaranteed and j.view.state is JobState.RUNNING:
                used[j.view.spec.user] = used.get(j.view.spec.user, 0) + j.min_gpus
        total = snapshot.cluster.total_gpus
        for j in jobs.values():  # snapshot order = submission order
            if not j.guaranteed:
                continue
            running = j.view.state is JobState.RUNNING
            if running:
                a = state.alloc.get(j.jid)
                ok = a is not None and self._meets_sla(j, a)
                if not ok:  # e.g. after a model refit: restore the guarantee first
                    changed = self._schedule_job(snapshot, state, jobs, j, privileged=True)
                    if changed and j.locked:
                        self.overrides.add(j.jid)  # logged SLA override [8.15]
                continue
            tenant = j.view.spec.user
            quota = self.quotas.get(tenant, total)
            if used.get(tenant, 0) + j.min_gpus > quota:
                continue  # waits [A11]
            if self._schedule_job(snapshot, state, jobs, j, privileged=True):
                used[tenant] = used.get(tenant, 0) + j.min_gpus
        # L5-6: best-effort queue and running jobs by slope.
        order = []
        for j in jobs.values():
            jid = j.jid
            if j.view.state is JobState.PENDING and j.guaranteed:
                continue
            if j.view.state is JobState.RUNNING and j.locked:
                continue
            xa = state.alloc.get(jid)
            x = xa.total if xa is not None else 0
            if j.view.state is JobState.RUNNING and x == 0:
                continue  # preempted earlier in this pass
            s_gpu = j.jm.sigma_plus(x)
            s_cpu = self._cpu_slope(j, state.alloc.get(jid))
            sign = self._slope_sign
            order.append(((0 if j.starving else 1, sign * s_gpu, sign * s_cpu,
                           j.view.spec.submit_time_s, jid), j))
        order.sort(key=lambda t: t[0])
        for _, j in order:
            if j.shrank:
                continue
            if j.view.state is JobState.RUNNING and state.alloc.get(j.jid) is None:
                continue
            self._schedule_job(snapshot, state, jobs, j, privileged=False)

    def _meets_sla(self, j: _Job, a: Alloc) -> bool:
        if not j.guaranteed or j.jm.info is None:
            return True
        return (self._speed_alloc(j.jm, a) >= 1.0 - self.sla_margin - 1e-9
                and a.total >= j.min_gpus)

    def _cpu_slope(self, j: _Job, a: Alloc | None) -> float:
        """Up-slope of the CPU curve (per CPU) at the job's CPUs [3.3]; 0 unless ZeRO-Offload."""
        if a is None or j.jm.info is None or a.cand.plan is None or not a.cand.plan.offload:
            return 0.0
        info = j.jm.info
        c0 = a.cpus_per_gpu
        s0 = self.speed(info, a.cand, c0, j.jm.t_ref)
        best = 0.0
        for c in range(c0 + 1, c0 + 9):
            best = max(best, (self.speed(info, a.cand, c, j.jm.t_ref) - s0) / ((c - c0) * a.total))
        return best

    def _walk(self, snapshot: ClusterSnapshot, state: State, jobs: dict[str, _Job], j: _Job,
              own: dict[str, int], cap: int, urgent_floor: int, privileged: bool, total: int,
              steals: list[tuple[str, str, float, float, bool]]) -> int:
        """The node walk of SCHEDULE_JOB (L10-26): gather free GPUs and steal from the lowest
        donors, node by node up to ``cap``; returns the GPUs gathered (steals appended).

        The order: the job's own nodes (most owned, then most free, then cluster order), then
        the others by free GPUs at the start of the walk, most first, ties in cluster order.
        Nodes that had no free GPU at the start come last in cluster order; most of them change
        nothing (no free GPU, no donor with a lower slope), so they are found with array
        operations over the free counts and the donor slopes of the pass (``State.dsig``)
        instead of one by one: a node is visited whenever the one-by-one walk would have done
        more than read a cached answer there."""
        pos, nodes = state.pos, state.nodes
        first = sorted(own, key=lambda n: (-own[n], -len(nodes[n].free_gpus), pos[n]))
        # the free counts at the start of the walk (visits change them), read lazily: most
        # walks end within the nodes of the highest count
        free0 = state.free_arr.copy()
        counts = [c for c in reversed(state.free_index.counts()) if c > 0]
        jm = j.jm
        dsig = state.dsig[privileged]

        def visit(n: str, total: int) -> int:
            free_n = len(nodes[n].free_gpus)
            total += min(free_n, max(0, cap - total))
            while total < cap:
                need_urgent = total < urgent_floor
                sp = jm.sigma_plus(total)
                if sp <= 0 and not need_urgent:
                    break
                if n not in own:
                    # the lowest donor's slope as filed for the node's current content (NaN:
                    # not asked since it changed; inf: no donor): when it says no, so would
                    # the (cached) answer below
                    known = dsig[pos[n]]
                    if known == math.inf or (known >= sp and not need_urgent):
                        break
                donor = self._lowest_donor(snapshot, state, jobs, n, j, privileged)
                if donor is None:
                    break
                djob, step, sigma_minus = donor
                if not (sp > sigma_minus or need_urgent):
                    break
                released = self._apply_step(state, jobs, djob, step, n)
                steals.append((n, djob, sp, sigma_minus, need_urgent))
                total += released
            return total

        for n in first:
            if total >= cap and own.get(n, 0) == 0:
                return total
            total = visit(n, total)
            if total >= cap:
                return total
        names = state.order
        for c in counts:
            for i in np.flatnonzero(free0 == c).tolist():
                n = names[i]
                if n in own:
                    continue
                if total >= cap:
                    return total
                total = visit(n, total)
                if total >= cap:
                    return total
        busy = free0 == 0  # the last part of the walk: nodes without free GPUs, cluster order
        for n in own:
            busy[pos[n]] = False
        if len(names) <= SMALL_CLUSTER:  # a few nodes: one by one is cheaper than arrays
            for i in np.flatnonzero(busy).tolist():
                total = visit(names[i], total)
                if total >= cap:
                    break
            return total
        start = 0
        # the nodes to visit, found anew whenever a visit gathered GPUs: one that did not
        # changed nothing but the node's own filed slope (and the walk is past it)
        hits = np.empty(0, dtype=np.intp)
        k = 0
        stale = True
        while total < cap:
            if stale:
                need_urgent = total < urgent_floor
                sp = jm.sigma_plus(total)
                todo = state.free_arr[start:] > 0
                if need_urgent:  # any donor, or not asked yet
                    todo |= ~(dsig[start:] == np.inf)
                elif sp > 0:  # a donor losing less than sp gains, or not asked yet
                    todo |= ~(dsig[start:] >= sp)
                todo &= busy[start:]
                hits = np.flatnonzero(todo)
                hits += start
                k = 0
                stale = False
            if k == hits.size:
                break
            i = int(hits[k])
            k += 1
            before = total
            total = visit(names[i], total)
            start = i + 1
            stale = total != before
        return total

    def _schedule_job(self, snapshot: ClusterSnapshot, state: State, jobs: dict[str, _Job],
                      j: _Job, *, privileged: bool) -> bool:
        """SCHEDULE_JOB (Alg. 1 L9-35). Returns True if the job's allocation changed."""
        jid = j.jid
        jm = j.jm
        cur = state.alloc.get(jid)
        x0 = cur.total if cur else 0
        if j.view.state is JobState.RUNNING and j.locked and not privileged:
            return False
        cap = max(jm.cap, j.min_gpus)
        # rule 2 of L17: below its minimum (or, starving, its smallest valid point) the job may
        # take GPUs whatever the slopes
        urgent_floor = max(j.min_gpus, jm.smallest_valid() if j.starving else 0)
        if (cur is not None and x0 >= cap and not privileged and state.free_index.total == 0
                and self._speed_alloc(jm, cur) >= (1 - EPS_FLAT) * jm.curve[
                    min(x0, len(jm.curve) - 1)]):
            return False  # saturated, on its best plan, nothing free: nothing to gain
        # A queued job's outcome is a function of the state and of what the key names (its
        # model, class, floors, CPU request; the job's identity plays no part, as it holds
        # nothing): when a job with the same key got nothing in this very state, neither does
        # this one. Thousands of queued jobs of a few hundred kinds fail in a row once the
        # cluster is full; a failure leaves the state (and its number) as it was.
        failed_key = None
        if cur is None:
            failed_key = (state.gen, id(jm), j.guaranteed, j.min_gpus, j.min_cpg, j.starving,
                          privileged, j.view.spec.num_cpus if jm.info is None else None)
            if failed_key in self._failed:
                return False
        changed = self._schedule_job_in(snapshot, state, jobs, j, privileged, cur, cap,
                                        urgent_floor)
        if not changed and failed_key is not None:
            self._failed.add(failed_key)
        return changed

    def _schedule_job_in(self, snapshot: ClusterSnapshot, state: State, jobs: dict[str, _Job],
                         j: _Job, privileged: bool, cur: Alloc | None, cap: int,
                         urgent_floor: int) -> bool:
        """SCHEDULE_JOB past its quick exits: walk, choose, re-take, commit or roll back."""
        jid = j.jid
        x0 = cur.total if cur else 0
        mark = state.mark()
        own = cur.counts() if cur else {}
        steals: list[tuple[str, str, float, float, bool]] = []  # node, donor, s+, s-, urgent
        total = x0
        # Rubick-E/N never take GPUs from other jobs (_lowest_donor finds none), and the walk
        # below then only counts free GPUs: it changes nothing, so they skip it.
        if self.variant not in ("E", "N"):
            total = self._walk(snapshot, state, jobs, j, own, cap, urgent_floor, privileged,
                               total, steals)
        # Choose the best configuration that fits what was gathered [L28-32].
        choice = self._best_fit(snapshot, state, j, own, cur)
        state.rollback(mark)
        if choice is None:
            return False
        cand, emb, cpg = choice
        # Re-take only the steals this configuration needs (lazy donors).
        taken = []
        for n, djob, sp, _, urgent in steals:
            if own.get(n, 0) + len(state.nodes[n].free_gpus) >= emb.get(n, 0):
                continue
            d = jobs[djob]
            if state.alloc.get(djob) is None:
                continue
            step = self._step_down(snapshot, state, d, n, urgent=privileged)
            if step is None:
                continue
            self._apply_step(state, jobs, djob, step[0], n)
            taken.append((jid, djob, sp, step[1], urgent))
        if any(own.get(n, 0) + len(state.nodes[n].free_gpus) < k for n, k in emb.items()):
            state.rollback(mark)
            return False
        new = self._alloc_for(snapshot, state, j, cand, emb, cpg, cur)
        if new is None:
            state.rollback(mark)
            return False
        if not self._commit_ok(j, cur, new):
            state.rollback(mark)
            return False
        state.set(jid, new)
        # Only now do the donors shrink: the walk's steals were tentative (rolled back above),
        # and a donor whose step was not needed, or whose receiver gave up, keeps its resources
        # and may still grow later in the pass.
        for _, djob, _, _, _ in taken:
            d = jobs[djob]
            d.shrank = True
            if d.locked:
                self.overrides.add(djob)  # SLA first: a locked best-effort job gives way [A8]
        self.moves.extend(taken)
        return True

    def _commit_ok(self, j: _Job, cur: Alloc | None, new: Alloc) -> bool:
        if j.guaranteed and not self._meets_sla(j, new):
            return False
        if cur is None:
            return True
        if (new.gpus == cur.gpus and new.cand == cur.cand
                and new.cpus_per_gpu == cur.cpus_per_gpu):
            return False
        s_new = self._speed_alloc(j.jm, new)
        s_cur = self._speed_alloc(j.jm, cur)
        if j.guaranteed and not self._meets_sla(j, cur):
            return True  # restoring the guarantee
        return s_new > s_cur * (1 + EPS_FLAT)

    def _best_fit(self, snapshot: ClusterSnapshot, state: State, j: _Job,
                  own: dict[str, int], cur: Alloc | None
                  ) -> tuple[Cand, dict[str, int], int] | None:
        """GET_BEST_PLAN over the job's candidates that fit what it owns plus the free GPUs
        (plus ALLOC_MEM)."""
        jm = j.jm
        info = jm.info
        avail_total = state.free_index.total + sum(own.values())
        least = j.min_gpus if j.guaranteed else 0
        # the embedding depends on the shape only (plans share it): once per shape
        embs: dict[tuple[Shape | None, int], dict[str, int] | None] = {}

        def fit(c: Cand) -> dict[str, int] | None:
            if c.gpus > avail_total or c.gpus < least:
                return None
            sk = (c.shape, c.gpus)
            if sk not in embs:
                embs[sk] = embed_free(c.shape, c.gpus, own, state)
            return embs[sk]

        own_cpu = dict(cur.cpus) if cur else {}
        own_mem = dict(cur.mem) if cur else {}
        c_maxes: dict[int, int] = {}  # by embedding (fits of one shape share it)
        for _, c, emb in in_flatness_order(jm.by_speed(), jm.by_size(), fit):
            # (the checks are independent: the cheapest first)
            if info is not None and c.plan is not None:
                ok = all(
                    state.nodes[n].free_mem + own_mem.get(n, 0.0)
                    >= host_memory_gb(info.model, c.plan, k, c.gpus) - 1e-9
                    for n, k in emb.items())
                if not ok:
                    continue  # ALLOC_MEM failed: next-best plan [A6]
            cpg = self._choose_cpus(state, j, c, emb, own, cur, own_cpu, c_maxes)
            if cpg is None:
                continue
            if j.guaranteed and info is not None and self.speed(
                    info, c, cpg, jm.t_ref) < 1.0 - self.sla_margin - 1e-9:
                continue  # within 1% of the best is not enough for a guarantee
            return c, emb, cpg
        return None

    def _choose_cpus(self, state: State, j: _Job, c: Cand, emb: dict[str, int],
                     own: dict[str, int], cur: Alloc | None, own_cpu: dict[str, int],
                     c_maxes: dict[int, int]) -> int | None:
        """CPUs per GPU: the fewest within 1% of the best the free (and own) CPUs allow;
        at least the job's floor. Non-offload plans are CPU-insensitive, so they get the
        floor (1 per GPU for best-effort jobs [A5]). ``own_cpu``: the job's CPUs per node
        (``cur``'s); ``c_maxes``: the CPUs per GPU each embedding allows, by ``id(emb)``
        (filled here; the state must not change while it is in use)."""
        info = j.jm.info
        c_max = c_maxes.get(id(emb))
        if c_max is None:
            c_max = c_maxes[id(emb)] = min(
                (state.nodes[n].free_cpus + own_cpu.get(n, 0)) // k for n, k in emb.items())
        floor = max(1, j.min_cpg if j.guaranteed else 1)
        if info is None:
            need_total = j.view.spec.num_cpus or c.gpus
            for n, k in emb.items():
                node = state.nodes[n]
                want = min(node.cpus, max(1, math.ceil(need_total * k / c.gpus)))
                if node.free_cpus + own_cpu.get(n, 0) < want:
                    return None
            return 1
        if c_max < floor:
            return None
        if c.plan is None or not c.plan.offload:
            return floor
        cap_c = max(floor, min(c_max, 16))
        # a function of the job model, the plan and the range (predictions are fixed within a
        # pass): memoised for the pass
        key = (id(j.jm), c, floor, cap_c)
        got = self._cpu_memo.get(key)
        if got is None:
            got = self._cpu_memo[key] = self._cpus_in(info, c, j.jm.t_ref, floor, cap_c)
        return got

    def _cpus_in(self, info: JobInfo, c: Cand, t_ref: float, floor: int, cap_c: int) -> int:
        """The fewest CPUs per GPU in [floor, cap_c] within 1% of the best there."""
        speeds = [(cc, self.speed(info, c, cc, t_ref)) for cc in range(floor, cap_c + 1)]
        best = max(s for _, s in speeds)
        for cc, s in speeds:
            if s >= (1 - EPS_FLAT) * best:
                return cc
        return floor

    def _alloc_for(self, snapshot: ClusterSnapshot, state: State, j: _Job, cand: Cand,
                   emb: dict[str, int], cpg: int, cur: Alloc | None) -> Alloc | None:
        own_idx = {n: cur.indices(n) for n in emb} if cur else {}
        gpus: dict[str, list[int]] = {}
        for n, k in emb.items():
            keep = sorted(own_idx.get(n, ()))[:k]
            extra = sorted(state.nodes[n].free_gpus)[: k - len(keep)]
            if len(keep) + len(extra) < k:
                return None
            gpus[n] = keep + extra
        new = self._make_alloc(snapshot, j.jm, cand, cpg, gpus, j.view)
        # capacity check against what is free plus what the job already holds
        for (n, c), (_, m) in zip(new.cpus, new.mem, strict=True):
            st = state.nodes[n]
            own_c = dict(cur.cpus).get(n, 0) if cur else 0
            own_m = dict(cur.mem).get(n, 0.0) if cur else 0.0
            if st.free_cpus + own_c < c or st.free_mem + own_m < m - 1e-9:
                return None
        return new

    # ------------------------------------------------------------------ donors
    def _lowest_donor(self, snapshot: ClusterSnapshot, state: State, jobs: dict[str, _Job],
                      node: str, receiver: _Job, privileged: bool
                      ) -> _Donor | None:
        """GetLowestSlopeOverMinJob (L13): the donor on ``node`` losing the least per GPU.

        Memoised for the pass by the node's version: the answer depends only on the jobs on
        the node and their allocations (steps are cached by allocation), the receiver if it
        is there, and ``privileged``; the walk asks for every node once per job."""
        rid = receiver.jid
        on_node = state.nodes[node].jobs
        here = rid in on_node
        if not (self.steal or privileged):
            if not here:
                state.dsig[privileged][state.pos[node]] = math.inf
            return None
        key = (node, state.version[node], privileged, rid if here else None)
        got: Any = self._donor_cache.get(key, _MISS)
        if got is _MISS:
            # a node often comes back to an earlier content (a job's walk steals, is rolled
            # back, then re-takes the same steps): the answer is keyed by content too
            alloc = state.alloc
            content = (node, privileged, rid if here else None,
                       frozenset([(d, alloc[d]) for d in on_node]))
            got = self._donor_content.get(content, _MISS)
            if got is _MISS:
                got = self._lowest_donor_uncached(snapshot, state, jobs, node, receiver,
                                                  privileged)
                self._donor_content[content] = got
            self._donor_cache[key] = got
        if not here:  # the receiver-independent answer: filed for the walk's skipping
            state.dsig[privileged][state.pos[node]] = math.inf if got is None else got[2]
        donor: _Donor | None = got
        return donor

    def _lowest_donor_uncached(
        self, snapshot: ClusterSnapshot, state: State, jobs: dict[str, _Job], node: str,
        receiver: _Job, privileged: bool,
    ) -> _Donor | None:
        best = None
        for did in sorted(state.nodes[node].jobs):
            if did == receiver.jid:
                continue
            d = jobs.get(did)
            if d is None:
                continue
            if self.variant in ("E", "N"):
                continue  # fixed resources: no shrinking or preemption [4.4 R]
            if d.locked and not (privileged and not d.guaranteed):
                continue
            step = self._step_down(snapshot, state, d, node, urgent=privileged)
            if step is None:
                continue
            target, sigma = step
            key = (sigma, -d.view.spec.submit_time_s, did)
            if best is None or key < best[0]:
                best = (key, did, target, sigma)
        if best is None:
            return None
        return best[1], best[2], best[3]

    def _step_down(self, snapshot: ClusterSnapshot, state: State, d: _Job, node: str,
                   urgent: bool) -> tuple[tuple[Cand | None, dict[str, int]], float] | None:
        a = state.alloc.get(d.jid)
        key = (d.jid, node, a)
        got = self._step_cache.get(key, _MISS)
        if got is _MISS:
            if a is not None and len(a.gpus) == 1:
                got = self._step_down_one_node(state, d, node, a)
            else:
                got = self._step_down_uncached(state, d, node)
            self._step_cache[key] = got
        return got  # type: ignore[return-value]

    def _step_down_one_node(self, state: State, d: _Job, node: str, a: Alloc
                            ) -> tuple[tuple[Cand | None, dict[str, int]], float] | None:
        """:meth:`_step_down_uncached` of a donor on one node: there the answer does not
        depend on which node it is (a step keeps the donor on its node), so donors of one kind
        in one configuration (most jobs of a big cluster) share it, renamed to the node."""
        (home, _), = a.gpus
        if home != node:
            return None  # nothing to free there
        key = (id(d.jm), a.cand, a.cpus_per_gpu, d.guaranteed, d.starving, d.min_gpus)
        got: Any = self._step_by_kind.get(key, _MISS)
        if got is _MISS:
            got = self._step_by_kind[key] = self._step_down_uncached(state, d, node)
        if got is None:
            return None
        (cand, emb), sigma = got
        if emb:  # {the node it was computed on: GPUs kept}; {} is a preemption
            (kept,) = emb.values()
            emb = {node: kept}
        return (cand, emb), sigma

    def _step_down_uncached(self, state: State, d: _Job, node: str
                            ) -> tuple[tuple[Cand | None, dict[str, int]], float] | None:
        """The donor's next valid configuration below its current one that frees at least one
        GPU on ``node`` and stays on its own nodes, with its loss rate sigma-minus [3.3]; None
        if it cannot give (at or below its minimum)."""
        a = state.alloc.get(d.jid)
        if a is None:
            return None
        x = a.total
        floor = d.min_gpus
        if d.starving:  # a starving job keeps its smallest valid point [3.7]
            floor = max(floor, d.jm.smallest_valid())
        if (d.guaranteed or d.starving) and x <= floor:
            return None
        s_cur = self._speed_alloc(d.jm, a)
        counts = a.counts()
        reduced = dict(counts)
        reduced[node] = counts.get(node, 0) - 1
        if reduced[node] < 0:
            return None
        if not d.jm.rigid:
            # prefer keeping GPUs off `node`: give it the lowest priority
            pref = {n: k for n, k in reduced.items() if n != node}
            # (embed compares positions of ``reduced``'s nodes only: their order suffices)
            order = sorted((n for n in reduced if n != node), key=state.pos.__getitem__)
            order.append(node)
            below = []  # (speed, candidate) of the configurations below x, candidate order
            for c in d.jm.cands:
                if c.gpus >= x or c.gpus < floor:
                    continue
                s = self.speed(d.jm.info, c, a.cpus_per_gpu, d.jm.t_ref)  # type: ignore[arg-type]
                if d.guaranteed and s < 1.0 - self.sla_margin - 1e-9:
                    continue
                below.append((s, c))
            embs: dict[tuple[Shape | None, int], dict[str, int] | None] = {}

            def fit(c: Cand) -> dict[str, int] | None:
                sk = (c.shape, c.gpus)
                if sk not in embs:
                    embs[sk] = embed(c.shape, c.gpus, reduced, pref, order)
                return embs[sk]

            # the next valid point below: the fewest GPUs within 1% of the best that fits
            # below x (then the faster)
            for s, c, emb in in_flatness_order(sorted(below, key=lambda o: -o[0]),
                                               sorted(below, key=lambda o: (o[1].gpus, -o[0])),
                                               fit):
                sigma = 0.0 if s >= s_cur else (s_cur - s) / (x - c.gpus)
                return (c, emb), sigma
        if d.guaranteed or d.starving:
            return None
        return (None, {}), s_cur / x  # preemption of a best-effort job

    def _apply_step(self, state: State, jobs: dict[str, _Job], djob: str,
                    step: tuple[Cand | None, dict[str, int]], node: str) -> int:
        """Shrink a donor to ``step``; returns the GPUs it released on ``node``."""
        a = state.alloc[djob]
        assert a is not None
        before = a.count(node)
        cand, emb = step
        d = jobs[djob]
        if cand is None:
            state.set(djob, None)
            return before
        gpus = {n: sorted(a.indices(n))[:k] for n, k in emb.items()}
        cpg = a.cpus_per_gpu
        new = self._make_alloc_raw(d, cand, cpg, gpus, state)
        state.set(djob, new)
        return before - new.count(node)

    def _make_alloc_raw(self, d: _Job, cand: Cand, cpg: int, gpus: dict[str, list[int]],
                        state: State) -> Alloc:
        info = d.jm.info
        parts = tuple((n, tuple(g)) for n, g in gpus.items() if g)
        total = sum(len(g) for _, g in parts)
        cpus = tuple((n, min(state.nodes[n].cpus, cpg * len(g))) for n, g in parts)
        mem = tuple((n, host_memory_gb(info.model, cand.plan, len(g), total)
                     if info is not None and cand.plan is not None else 0.0) for n, g in parts)
        return Alloc(parts, cpus, mem, cand, cpg)

    # ------------------------------------------------------------------ actions
    def _settings(self, j: _Job, a: Alloc, memo: dict[_Key, JobSettings]) -> JobSettings:
        """The settings of an allocation. ``memo``: the pass's settings by what they are made
        of (jobs of one kind on one configuration share one frozen object)."""
        info = j.jm.info
        if info is None or a.cand.plan is None:
            return AS_SUBMITTED
        plan = a.cand.plan
        cpus = sum(c for _, c in a.cpus)
        mem_gb = round(sum(m for _, m in a.mem), 3) or None
        key = (id(info.model), plan, a.total, cpus, mem_gb)  # (models live through the pass)
        got = memo.get(key)
        if got is None:
            steps = accumulation_steps(info.model, plan, a.total)
            acc, micro = steps if steps else (1, None)
            got = memo[key] = JobSettings(plan=plan.code, cpus=cpus, mem_gb=mem_gb,
                                          accumulation_steps=acc, sub_batch_size=micro)
        return got

    def _actions(self, snapshot: ClusterSnapshot, state: State, before: dict[str, Alloc | None],
                 jobs: dict[str, _Job]) -> list[Action]:
        preempts: list[Action] = []
        moves: list[tuple[str, Alloc, JobSettings, bool]] = []
        settings_memo: dict[_Key, JobSettings] = {}
        for jid, j in jobs.items():
            old = before.get(jid)
            new = state.alloc.get(jid)
            if j.view.state is JobState.RUNNING:
                if new is None:
                    preempts.append(Preempt(job_id=jid, reason="rubick: shrunk to zero"))
                    self._reconfs[jid] = self._reconfs.get(jid, 0) + 1
                    continue
                if old is not None and new.gpus == old.gpus and new.cand == old.cand and (
                        new.cpus_per_gpu == old.cpus_per_gpu):
                    continue
                moves.append((jid, new, self._settings(j, new, settings_memo), True))
                self._reconfs[jid] = self._reconfs.get(jid, 0) + 1
            elif j.view.state is JobState.PENDING and new is not None:
                moves.append((jid, new, self._settings(j, new, settings_memo), False))
            if new is not None:
                self.last_assigned[jid] = (new.cand, new.cpus_per_gpu,
                                           self._speed_alloc(j.jm, new))
        if len(self.last_assigned) > 4 * len(jobs) + 64:
            self.last_assigned = {k: v for k, v in self.last_assigned.items() if k in jobs}
            self._reconfs = {k: v for k, v in self._reconfs.items() if k in jobs}
            self._models = {k: v for k, v in self._models.items() if k in jobs}
            self._infos = {k: v for k, v in self._infos.items() if k in jobs}
            self._minres = {k: v for k, v in self._minres.items() if k in jobs}
            self.guaranteed = {k: v for k, v in self.guaranteed.items() if k in jobs}
        # Order so every placement's GPUs are free when applied; break cycles by preempting.
        holds = SlotHolds()
        for jid, j in jobs.items():
            a = before.get(jid)
            if a is not None and j.view.state is JobState.RUNNING:
                for n, g in a.gpus:
                    for i in g:
                        holds.hold((n, i), jid)
        out: list[Action] = list(preempts)
        for act in preempts:
            holds.release(act.job_id)
        todo = moves
        while todo:
            left = []  # in order, those whose GPUs are still held by another job
            for item in todo:
                jid, new, settings, running = item
                if holds.take([(n, i) for n, g in new.gpus for i in g], jid):
                    out.append(self._place_action(jobs[jid], new, settings, running))
                else:
                    left.append(item)
            if len(left) == len(todo):
                jid = left[0][0]
                out.append(Preempt(job_id=jid, reason="rubick: break a placement cycle"))
                holds.release(jid)
                left[0] = (jid, left[0][1], left[0][2], False)
            todo = left
        return out

    def _place_action(self, j: _Job, a: Alloc, settings: JobSettings, running: bool) -> Action:
        p = a.placement()
        if j.jm.rigid and not running and a.total == j.view.spec.num_gpus:
            return Start(job_id=j.jid, placement=p, reason="rubick: rigid job")
        plan = settings.plan or "as submitted"
        why = f"rubick: {plan} on {a.total} GPU(s), {settings.cpus} CPU(s)"
        return Reconfigure(job_id=j.jid, placement=p, settings=settings, reason=why)

    # ------------------------------------------------------------------ explain
    def explain(self, snapshot: ClusterSnapshot, job_id: str) -> str:
        view = snapshot.by_id.get(job_id)
        if view is None:
            return f"job {job_id} is not active"
        jm = self.job_model(view, snapshot)
        if jm.info is None:
            base = f"job {job_id}: unknown model, rigid on {view.spec.num_gpus} GPU(s)"
        else:
            valid = ", ".join(f"{x}:{jm.curve[x]:.2f}" for x in jm.valid)
            base = (f"job {job_id} ({jm.info.model.name}, plan {jm.info.orig_plan.code}): "
                    f"curve valid points {valid}; cap {jm.cap} GPUs")
        if view.state is JobState.PENDING:
            return base + f"; waits: up-slope {jm.sigma_plus(0):.3f} per GPU too low or no room"
        return base + f"; running {view.settings.plan or 'as submitted'} on {view.placement}"


POLICIES = [
    Rubick,
    ("rubick-e", functools.partial(Rubick, variant="E"),
     "Rubick-E: reconfigures plans only; resources fixed at the request (ablation)"),
    ("rubick-r", functools.partial(Rubick, variant="R"),
     "Rubick-R: re-allocates resources only; plan type fixed, 3D jobs scale DP (ablation)"),
    ("rubick-n", functools.partial(Rubick, variant="N"),
     "Rubick-N: neither; Rubick's ordering and placement only (ablation)"),
]
