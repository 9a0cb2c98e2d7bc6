"""How closely the baseline's replay reproduces the observed history: how far to trust the
simulator on this cluster.

For every job both schedules ran, the start difference is simulated start - observed start
(positive: the simulation started it later). Reported: the mean absolute difference, the median
(signed) difference, the 90th percentile of the absolute difference, and the share of jobs whose
absolute difference is within the tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slurm_sched.advisor.metrics import mean, percentile
from slurm_sched.advisor.outcomes import JobOutcome

#: Default tolerance of "started at the observed time", seconds.
TOLERANCE_S = 600.0


@dataclass(frozen=True)
class Validation:
    """Start-time agreement of one simulated schedule with the observed one."""

    policy: str
    jobs: int
    mean_abs_s: float
    median_s: float
    p90_abs_s: float
    within_share: float
    tolerance_s: float


def validate(
    policy: str,
    observed: Sequence[JobOutcome],
    simulated: Sequence[JobOutcome],
    *,
    tolerance_s: float = TOLERANCE_S,
) -> Validation:
    """Compare the start times of the jobs present in both (matched by job id)."""
    sim_start = {o.job_id: o.start_s for o in simulated}
    diffs = [sim_start[o.job_id] - o.start_s for o in observed if o.job_id in sim_start]
    absolute = [abs(d) for d in diffs]
    return Validation(
        policy=policy,
        jobs=len(diffs),
        mean_abs_s=mean(absolute),
        median_s=percentile(diffs, 50),
        p90_abs_s=percentile(absolute, 90),
        within_share=(sum(1 for a in absolute if a <= tolerance_s) / len(absolute)
                      if absolute else 0.0),
        tolerance_s=tolerance_s,
    )
