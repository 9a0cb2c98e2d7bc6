"""Seeded workloads of the Gandiva_fair reproduction (``docs/reproductions/gandiva-fair.md``).

- :func:`homogeneous`: the slides' fair-share experiment: 48 P100 GPUs (12 servers x 4), 70
  users with one job each of 1, 2, 4 or 8 GPUs, sizes drawn from the Philly job-size
  distribution (:func:`philly_size_distribution`: the bundled Pollux copy of the Philly trace,
  restricted to those four sizes: 1 GPU 93.5%, 2 GPUs 2.2%, 4 GPUs 2.3%, 8 GPUs 2.0%). All
  jobs arrive at time 0 and are long enough to outlast the measurement window.
- :func:`heterogeneous`: the slides' trading experiment on the spec's corrected cluster: config
  ``"200"`` = 24 V100 + 48 P100 + 128 K80 (the paper's 200-GPU cluster, default) or ``"100"`` = 12
  V100 + 24 P100 + 64 K80; 4 users, each submitting one job type (the spec's choice: VAE,
  SuperResolution, ResNet50, DCGAN of the slides' table, i.e. V100 speed-ups 1.25, 1.87, 5.14,
  6.42 over a K80), each with "many 1, 2 or 4 GPU jobs": sizes uniform over {1, 2, 4} (the
  slides give no mix) and enough of them that each user's demand is ``demand_factor`` x its
  fair share of GPUs, so every user can use what it is entitled to, before and after trading.
- :func:`philly_window`: a bounded slice of the Pollux Philly trace with its virtual clusters as
  users: the jobs submitted in ``[start_day, start_day + days)``, submit times rebased to 0.

Job durations are in seconds on a K80 (the ``gpu-generations`` progress model's reference).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache

import numpy as np

from slurm_sched.model import JobSpec
from slurm_sched.traces import bundled, read_trace

HOMOGENEOUS_CLUSTER = "12x4:p100"
HETEROGENEOUS_CLUSTERS = {
    "200": "6x4:v100,12x4:p100,32x4:k80",
    "100": "3x4:v100,6x4:p100,16x4:k80",
}
#: The four users' job types (slides' table), low to high V100 speed-up.
TRADING_USER_TYPES: tuple[str, ...] = ("VAE", "SuperResolution", "ResNet50", "DCGAN")
#: Long enough that no job finishes inside a measurement window of a few simulated days.
LONG_JOB_S = 1.0e8
PHILLY_SIZES = (1, 2, 4, 8)


def philly_size_distribution(sizes: Sequence[int] = PHILLY_SIZES) -> dict[int, float]:
    """Fraction of Philly jobs of each size in ``sizes`` (the trace restricted to them)."""
    counts = _philly_sizes()
    total = sum(counts[s] for s in sizes)
    return {s: counts[s] / total for s in sizes}


@cache
def _philly_sizes() -> Counter[int]:
    return Counter(j.num_gpus for j in read_trace(bundled("pollux/philly.csv")))


def homogeneous(
    seed: int = 0,
    num_users: int = 70,
    duration_s: float = LONG_JOB_S,
    job_type: str = "ResNet50",
) -> list[JobSpec]:
    """70 users x one job of 1/2/4/8 GPUs (Philly distribution), all at time 0."""
    if num_users < 1:
        raise ValueError(f"num_users must be >= 1, got {num_users}")
    dist = philly_size_distribution()
    rng = np.random.default_rng(seed)
    sizes = rng.choice(list(dist), size=num_users, p=list(dist.values()))
    return [
        JobSpec(
            job_id=f"u{i:02d}-job",
            submit_time_s=0.0,
            num_gpus=int(sizes[i]),
            duration_s=duration_s,
            user=f"u{i:02d}",
            model=job_type,
        )
        for i in range(num_users)
    ]


def heterogeneous(
    seed: int = 0,
    config: str = "200",
    user_types: Sequence[str] = TRADING_USER_TYPES,
    demand_factor: float = 2.0,
    duration_s: float = LONG_JOB_S,
) -> tuple[str, list[JobSpec]]:
    """(cluster spec, jobs) of the trading experiment; users are ``U1``..``Un``."""
    if config not in HETEROGENEOUS_CLUSTERS:
        raise ValueError(f"config must be one of {sorted(HETEROGENEOUS_CLUSTERS)}, got {config!r}")
    if demand_factor <= 0:
        raise ValueError(f"demand_factor must be > 0, got {demand_factor}")
    cluster = HETEROGENEOUS_CLUSTERS[config]
    total_gpus = sum(int(n) * int(g.split(":")[0]) for n, g in
                     (part.split("x") for part in cluster.split(",")))
    rng = np.random.default_rng(seed)
    per_user = demand_factor * total_gpus / len(user_types)
    jobs: list[JobSpec] = []
    for ui, jt in enumerate(user_types, start=1):
        demand = 0
        k = 0
        while demand < per_user:
            size = int(rng.choice([1, 2, 4]))
            jobs.append(
                JobSpec(
                    job_id=f"U{ui}-{k:03d}",
                    submit_time_s=0.0,
                    num_gpus=size,
                    duration_s=duration_s,
                    user=f"U{ui}",
                    model=jt,
                )
            )
            demand += size
            k += 1
    return cluster, jobs


def philly_window(start_day: float = 21.0, days: float = 2.0) -> list[JobSpec]:
    """Philly jobs submitted in ``[start_day, start_day + days)`` (days from the trace start),
    submit times rebased so the window starts at 0; users = Philly virtual clusters."""
    if days <= 0 or start_day < 0:
        raise ValueError(f"need start_day >= 0 and days > 0, got {start_day}, {days}")
    t0, t1 = start_day * 86400.0, (start_day + days) * 86400.0
    jobs = read_trace(bundled("pollux/philly.csv"))
    return [
        j.model_copy(update={"submit_time_s": j.submit_time_s - t0})
        for j in jobs if t0 <= j.submit_time_s < t1
    ]
