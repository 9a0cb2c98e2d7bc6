"""Rubick's resource sensitivity curves [3.2] (spec ``shared/specs/rubick.md``): a job's GPU
curve from its candidates' speeds (monotone with the flatness tolerance :data:`EPS_FLAT`), the
flat curve of a rigid job, and the shape and plan-family rules the candidates obey.
"""

from __future__ import annotations

from slurm_sched.perf.rubick.job_info import JobInfo
from slurm_sched.perf.rubick.plans import Plan
from slurm_sched.perf.rubick.shapes import Shape
from slurm_sched.policy.rubick.candidates import Cand, JobModel

EPS_FLAT = 0.01  # flatness tolerance of the curves [X]


def fits_cluster(shape: Shape, sizes: list[int]) -> bool:
    """Whether a shape embeds into empty nodes of these sizes (descending)."""
    parts = sorted(shape, reverse=True)
    return len(parts) <= len(sizes) and all(k <= s for k, s in zip(parts, sizes, strict=False))


def split_largest_first(gpus: int, sizes: list[int]) -> list[int]:
    """GPUs per node when filling the largest nodes first."""
    out = []
    for k in sizes:
        if gpus <= 0:
            break
        out.append(min(k, gpus))
        gpus -= out[-1]
    return out or [gpus]


def same_family(plan: Plan, orig: Plan) -> bool:
    """Rubick-R: the original plan type; 3D jobs scale their DP size only [4.4]."""
    if orig.is_3d:
        return plan.is_3d and plan.tp == orig.tp and plan.pp == orig.pp and plan.gc == orig.gc
    return plan.family == orig.family and plan.gc == orig.gc


def rigid_model(gpus: int, total: int, version: int) -> JobModel:
    cand = Cand(None, None, gpus)
    start = max(gpus, 0)
    curve = [0.0] * min(start, total + 1) + [1.0] * max(0, total + 1 - start)
    return JobModel(None, [cand], {cand: 1.0}, curve, [gpus], gpus, 1.0, 1.0, version)


def curve_model(info: JobInfo, cands: list[Cand], speed: dict[Cand, float], total: int,
                c_curve: float, t_ref: float, version: int) -> JobModel:
    best: dict[int, float] = {}
    for c in cands:
        if 0 <= c.gpus <= total:
            best[c.gpus] = max(best.get(c.gpus, 0.0), speed[c])
    # C[x]: the running max with flatness over x = 0..total, a step function that only moves
    # at the candidates' GPU counts (built a flat stretch at a time: total = the cluster's GPUs)
    curve = [0.0]
    valid: list[int] = []
    prev = 0.0
    for x in sorted(best):
        if x < 1:
            continue
        curve.extend([prev] * (x - len(curve)))
        if best[x] > prev * (1 + EPS_FLAT) and best[x] > 0:
            prev = best[x]
            valid.append(x)
        curve.append(prev)
    curve.extend([prev] * (total + 1 - len(curve)))
    top = curve[-1]
    cap = next((x for x in valid if curve[x] >= (1 - EPS_FLAT) * top), valid[-1] if valid else 0)
    return JobModel(info, cands, speed, curve, valid, cap, c_curve, t_ref, version)
