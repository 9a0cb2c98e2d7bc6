"""GET_BEST_PLAN [3.6] (spec ``shared/specs/rubick.md``): the fastest feasible execution plan of
a model on a placement shape.
"""

from __future__ import annotations

from collections.abc import Iterable

from slurm_sched.perf.rubick.measured import MeasuredCatalog, measured_catalog
from slurm_sched.perf.rubick.memory import enumerate_plans
from slurm_sched.perf.rubick.models import ModelSpec
from slurm_sched.perf.rubick.plans import Plan, plan_order
from slurm_sched.perf.rubick.predictors import Predictor
from slurm_sched.perf.rubick.shapes import Shape


def get_best_plan(model: ModelSpec, shape: Shape, cpus_per_gpu: float, predictor: Predictor,
                  catalog: MeasuredCatalog | None = None, plans: Iterable[Plan] | None = None
                  ) -> tuple[Plan, float] | None:
    """GET_BEST_PLAN [3.6]: the feasible plan with the smallest predicted iteration time on a
    placement shape (ties by plan order), with that time in seconds; None if none fits.

    Feasible = measured on this shape for models with measured tables, else the plan space of
    :func:`enumerate_plans` (analytic memory estimate)."""
    cat = catalog or measured_catalog()
    if plans is None:
        if cat.rows.get(model.name):
            plans = [p for p, s, _ in cat.configs(model.name) if s == shape]
        else:
            plans = enumerate_plans(model, shape)
    best = None
    for plan in plans:
        t = predictor.iter_time_s(model, plan, shape, cpus_per_gpu)
        if t is None:
            continue
        key = (t, plan_order(plan), plan)
        if best is None or key < best[0]:
            best = (key, plan, t)
    return None if best is None else (best[1], best[2])
