"""The ``rubick`` progress model (:data:`PROGRESS_MODELS`): a job's speed under its current plan,
placement and CPUs relative to its requested configuration, in the measured world; and the
iteration time a running job has shown (:func:`observed_iter_time_s`). ``rubick-steps`` is the
same world with the work counted in iterations, as the authors' simulator counts it.
"""

from __future__ import annotations

from slurm_sched.model import JobSpec, JobView, Placement
from slurm_sched.perf.progress import ProgressModel
from slurm_sched.perf.rubick.job_info import JobInfo, job_info
from slurm_sched.perf.rubick.measured import MeasuredCatalog, measured_catalog
from slurm_sched.perf.rubick.plans import Plan
from slurm_sched.perf.rubick.shapes import Shape, shape_of


def world_time_s(info: JobInfo, plan: Plan, shape: Shape, cpus_per_gpu: float,
                 catalog: MeasuredCatalog | None = None) -> float:
    """Iteration time of a job in the simulated world; never fails.

    Measured configurations use the tables. A configuration that was never measured (another
    policy may place a job on an odd split) runs at the slowest measured time of the same plan
    family on as many GPUs; failing that, at its requested configuration's time scaled by the
    GPU ratio (as if linear); the penalty keeps such placements unattractive.
    """
    cat = catalog or measured_catalog()
    name = info.model.name
    t = cat.time_s(name, plan, shape, cpus_per_gpu)
    if t is not None:
        return t
    g = sum(shape)
    same = [tt for p, s, tt in cat.configs(name)
            if sum(s) == g and p.family == plan.family and p.gc == plan.gc]
    if same:
        return max(same)
    ref = cat.time_s(name, info.orig_plan, info.ref_shape, cat.table_cpus)
    if ref is None:
        ref = 1.0
    return ref * info.req_gpus / max(1, g) * 1.5


class RubickProgress(ProgressModel):
    """The ``rubick`` world: a job advances at ``T_ref / T_now``, where ``T_ref`` is the
    measured iteration time of its requested configuration (the trace's duration was derived
    from it) and ``T_now`` that of its current plan, placement and CPUs (``JobSettings.plan``,
    ``cpus``). Jobs of unknown models run at their isolated speed."""

    def __init__(self, catalog: MeasuredCatalog | None = None) -> None:
        self.catalog = catalog or measured_catalog()
        self._infos: dict[str, JobInfo | None] = {}

    def _info(self, spec: JobSpec) -> JobInfo | None:
        if spec.job_id not in self._infos:
            self._infos[spec.job_id] = job_info(spec)
        return self._infos[spec.job_id]

    def plan_speed(self, job: JobView, placement: Placement) -> float:
        info = self._info(job.spec)
        if info is None:
            return 1.0
        return speed_of(info, job.settings.plan, job.settings.cpus, placement, self.catalog)


class RubickStepsProgress(RubickProgress):
    """The ``rubick-steps`` world: as ``rubick``, but a job of ``iterations`` (the trace's
    ``steps``) runs ``iterations + extra_iterations`` iterations of its current configuration's
    measured time, whatever its ``duration``. The authors' simulator ends a job on the iteration
    after its ``steps``-th (``extra_iterations=1``), and its ``steps`` is at least 1 where the
    trace's duration is a fraction of one iteration (e.g. LLaMA-30B jobs of 0.007 s). Jobs
    without ``iterations`` run as in ``rubick``.

    Contract: the rate is ``duration / ((iterations + extra) * T_now)`` work-seconds per second,
    so the job's busy time is ``(iterations + extra) * T_now`` on a fixed configuration."""

    def __init__(self, catalog: MeasuredCatalog | None = None, extra_iterations: int = 1) -> None:
        super().__init__(catalog)
        if extra_iterations < 0:
            raise ValueError(f"extra_iterations must be >= 0, got {extra_iterations}")
        self.extra_iterations = extra_iterations
        self._work: dict[tuple[str, float, int], float] = {}

    def plan_speed(self, job: JobView, placement: Placement) -> float:
        speed = super().plan_speed(job, placement)
        spec = job.spec
        info = self._info(spec)
        if info is None or not spec.iterations or spec.duration_s <= 0:
            return speed
        key = (spec.job_id, spec.duration_s, spec.iterations)
        f = self._work.get(key)
        if f is None:  # duration / work in requested-configuration seconds
            t_ref = world_time_s(info, info.orig_plan, info.ref_shape, self.catalog.table_cpus,
                                 self.catalog)
            f = self._work[key] = spec.duration_s / (
                (spec.iterations + self.extra_iterations) * t_ref)
        return speed * f


def speed_of(info: JobInfo, plan_code: str | None, cpus: int | None, placement: Placement,
             catalog: MeasuredCatalog | None = None) -> float:
    """Speed of a job relative to its requested configuration in the measured world."""
    cat = catalog or measured_catalog()
    shape = shape_of(placement)
    g = sum(shape)
    plan = info.orig_plan
    if plan_code:
        try:
            plan = Plan.parse(plan_code, g)
        except ValueError:
            plan = info.orig_plan
    if plan.is_3d and plan.gpus(g) != g:
        plan = info.orig_plan if info.orig_plan.gpus(g) == g else Plan("dp")
    c = (cpus / g) if cpus else info.req_cpus_per_gpu
    t_ref = world_time_s(info, info.orig_plan, info.ref_shape, cat.table_cpus, cat)
    t_now = world_time_s(info, plan, shape, c, cat)
    return t_ref / t_now


def observed_iter_time_s(job: JobView, now_s: float, warmup_s: float = 30.0) -> float | None:
    """The iteration time a running job reports: its measured per-iteration time on the
    requested configuration (``duration / iterations``) divided by its current speed; None until
    it has run ``warmup_s`` past its restart."""
    if job.rate <= 0 or not job.spec.iterations or job.placement is None:
        return None
    if now_s < job.stall_until_s + warmup_s:
        return None
    base = job.spec.iteration_time_s
    return None if base is None else base / job.rate


PROGRESS_MODELS = {"rubick": RubickProgress, "rubick-steps": RubickStepsProgress}
