"""What Rubick knows of a job (:class:`JobInfo`, :func:`job_info`): its model, its requested plan
and placement shape, read from the job's spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache

from slurm_sched.model import JobSpec
from slurm_sched.perf.rubick.hashing import hash_once
from slurm_sched.perf.rubick.measured import MeasuredCatalog, measured_catalog
from slurm_sched.perf.rubick.memory import accumulation_steps
from slurm_sched.perf.rubick.models import ModelSpec, model_spec
from slurm_sched.perf.rubick.plans import Plan
from slurm_sched.perf.rubick.shapes import Shape, compact_shape

_MISS = object()  # memo miss marker (None is a remembered answer)


@hash_once
@dataclass(frozen=True)
class JobInfo:
    """What Rubick knows about a job with a known model (spec §1.4)."""

    model: ModelSpec
    orig_plan: Plan
    ref_shape: Shape  # the requested placement
    req_gpus: int
    req_cpus_per_gpu: float
    allowed: frozenset[str] | None  # plan codes the job supports (hints), None = all
    guaranteed: bool
    tenant: str


def job_info(spec: JobSpec, memo: dict[tuple, JobInfo | None] | None = None
             ) -> JobInfo | None:
    """Rubick's view of a job: None if its model is unknown (the job is then rigid).

    The original plan is ``attrs["exec_plan"]`` (Rubick traces) or the first of
    ``attrs["plans"]`` (hints); default plain DP, or the fastest measured 3D plan on the
    requested GPUs for models that cannot run DP. Class: ``attrs["guaranteed"]`` or
    ``attrs["is_sla"]``.

    ``memo`` (the caller's, e.g. one scheduler's): jobs of one kind (same model, batch, GPUs,
    CPUs, tenant, plans and class) get one shared :class:`JobInfo` from it; a big cluster's
    first pass reads thousands of them.
    """
    attrs = spec.attrs or {}
    plans = attrs.get("plans")
    code = attrs.get("exec_plan")
    guaranteed = bool(attrs.get("guaranteed", attrs.get("is_sla", False)))
    args = (spec.model, spec.batch_size, spec.num_gpus, spec.num_cpus, spec.user, code)
    if memo is not None and (plans is None or type(plans) in (list, tuple)) and (
            code is None or type(code) is str):
        key = (*args, None if plans is None else tuple(plans), guaranteed)
        try:
            got = memo.get(key, _MISS)
        except TypeError:  # an unhashable plan entry: read it without the memo
            got = _job_info(*args, plans, guaranteed)
        else:
            if got is _MISS:
                got = memo[key] = _job_info(*key)
        return got  # type: ignore[return-value]
    return _job_info(*args, plans, guaranteed)


def _job_info(model_name: str | None, batch_size: int | None, g: int, num_cpus: int | None,
              user: str, code: object, plans: Sequence[object] | None,
              guaranteed: bool) -> JobInfo | None:
    model = model_spec(model_name)
    if model is None:
        return None
    if batch_size is not None and batch_size != model.batch:
        model = _with_batch(model, batch_size)
    code = code or (plans[0] if plans else None)
    plan, ref = _requested_plan(model, str(code) if code else None, g)
    cat = measured_catalog()
    cpus = (num_cpus / g) if num_cpus else cat.table_cpus
    allowed = None
    if plans:
        allowed_set = set()
        for c in plans:
            try:
                allowed_set.add(Plan.parse(str(c), g).code)
            except ValueError:
                continue
        allowed = frozenset(allowed_set) or None
    return JobInfo(model, plan, ref, g, float(cpus), allowed, guaranteed, user)


@lru_cache(maxsize=1 << 16)
def _requested_plan(model: ModelSpec, code: str | None, gpus: int) -> tuple[Plan, Shape]:
    """A job's original plan (``code``, else the default) and requested placement on
    ``gpus`` GPUs; memoised: schedulers ask for thousands of jobs of a few kinds."""
    try:
        plan = Plan.parse(code, gpus) if code else None
    except ValueError:
        plan = None
    cat = measured_catalog()
    if plan is None or (plan.is_3d and plan.gpus(gpus) != gpus):
        plan = _default_plan(model, gpus, cat)
    return plan, _ref_shape(model, plan, gpus, cat)


@cache
def _with_batch(model: ModelSpec, batch: int) -> ModelSpec:
    return replace(model, batch=batch)


def _default_plan(model: ModelSpec, gpus: int, cat: MeasuredCatalog) -> Plan:
    if accumulation_steps(model, Plan("dp"), gpus) is not None and (
        model.micro_limit("dp", False) or 0) > 0:
        return Plan("dp")
    best = None
    for p, s, t in cat.configs(model.name):
        if sum(s) == gpus and (best is None or t < best[1]):
            best = (p, t)
    return best[0] if best else Plan("zero-offload")


def _ref_shape(model: ModelSpec, plan: Plan, gpus: int, cat: MeasuredCatalog) -> Shape:
    """The requested placement: the fastest measured placement of the plan with that many GPUs
    (3D plans have fixed shapes), else the most compact one."""
    best = None
    for p, s, t in cat.configs(model.name):
        if p == plan and sum(s) == gpus and (best is None or t < best[1]
                                             or (t == best[1] and len(s) < len(best[0]))):
            best = (s, t)
    if best is not None and (plan.is_3d or best[0] == compact_shape(gpus)):
        return best[0]
    return compact_shape(gpus)
