"""SJF-BSBF's simulated world: the progress model of its experiments, running jobs by
:mod:`slurm_sched.perf.sjf_bsbf_model`.

A job's work is its exclusive run time ``duration_s`` at its requested configuration (GPU count
packed on 4-GPU nodes, the per-GPU batch split as the Pollux trace reader does). Its rate is
``t_iter(requested) / t_iter(actual sub-batch, steps, placement)`` (both from the fitted model,
so the requested configuration runs at exactly rate 1), times the statistical-efficiency ratio
when an elastic policy (Pollux) changed the global batch, divided by the largest xi over its
co-runners (synchronous SGD runs at the pace of its slowest worker, spec 2.5). Jobs without an
application profile run at rate 1 alone and are slowed by the default xi when co-located.

Registered names: ``sjf-bsbf`` (Gavel pairs, default xi 1.5 or ``$SJF_BSBF_XI_DEFAULT``; a
uniform xi everywhere if ``$SJF_BSBF_XI`` is set) and ``sjf-bsbf-xi<X>`` for X in
:data:`~slurm_sched.perf.sjf_bsbf_model.SWEEP_XI` (uniform xi, Fig. 6b).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from slurm_sched.model import JobView, Placement
from slurm_sched.perf.pollux_goodput import efficiency_ratio
from slurm_sched.perf.progress import ProgressModel
from slurm_sched.perf.sjf_bsbf_model import (
    SWEEP_XI,
    Interference,
    UniformXi,
    current_sub_batch,
    default_interference,
    job_profile,
)


class SjfBsbfWorld(ProgressModel):
    """Progress model of the SJF-BSBF experiments (see the module docstring)."""

    def __init__(self, interference: Interference | None = None) -> None:
        self.interference = interference if interference is not None else default_interference()

    def plan_speed(self, job: JobView, placement: Placement) -> float:
        prof = job_profile(job.spec)
        if prof is None:
            return 1.0
        settings = job.settings
        b = current_sub_batch(job, prof) or prof.solo_b
        steps = settings.accumulation_steps if settings.sub_batch_size is not None else None
        if steps is None or steps < 1:
            steps = prof.steps_for(b)
        k = placement.num_gpus
        t = prof.iter_model.t_iter(b, steps, len(placement.parts), k)
        speed = prof.ref_time_s / t
        if k != prof.num_gpus or steps != prof.steps_for(b):
            # an elastic policy changed the global batch: progress per step changes too
            frac = job.work_done_s / job.spec.duration_s if job.spec.duration_s > 0 else 0.0
            speed *= efficiency_ratio(prof, k * b * steps, frac)
        return speed

    def sharing_slowdown(
        self, job: JobView, placement: Placement, co_located: Sequence[JobView]
    ) -> float:
        prof = job_profile(job.spec)
        app = prof.app if prof else None
        b = current_sub_batch(job, prof)
        worst = 1.0
        for co in co_located:
            cprof = job_profile(co.spec)
            x = self.interference.xi(app, b, cprof.app if cprof else None,
                                     current_sub_batch(co, cprof))
            worst = max(worst, x)
        return worst


def xi_label(x: float) -> str:
    """``1.0`` -> ``"1.0"``, ``1.25`` -> ``"1.25"`` (the suffix of the sweep's world names)."""
    text = f"{x:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _uniform_world(x: float) -> Callable[[], ProgressModel]:
    return lambda: SjfBsbfWorld(UniformXi(x))


PROGRESS_MODELS: dict[str, Callable[[], ProgressModel]] = {"sjf-bsbf": SjfBsbfWorld}
PROGRESS_MODELS.update({f"sjf-bsbf-xi{xi_label(x)}": _uniform_world(x) for x in SWEEP_XI})
