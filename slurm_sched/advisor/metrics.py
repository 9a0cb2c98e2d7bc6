"""The metrics row of one schedule (observed or simulated), from its job outcomes.

Contract (every row, the observed one included):

- JCT = end - submit; queueing = JCT - time running (start - submit for a job never
  preempted); average, median and p99 (linear interpolation) of each.
- utilisation = busy GPU-seconds / (cluster GPUs x span), span = last end - first submit.
- per account: its share of the GPU-seconds of all jobs, and its mean slowdown
  (JCT / observed run time).
- by job size: the same JCT and queueing figures and mean slowdown per bucket of requested
  GPUs (:data:`SIZE_BUCKETS`); an empty bucket is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from slurm_sched.advisor.outcomes import JobOutcome

#: Job size buckets: (label, fewest GPUs, most GPUs).
SIZE_BUCKETS: tuple[tuple[str, int, float], ...] = (
    ("1", 1, 1), ("2-4", 2, 4), ("5-8", 5, 8), (">8", 9, math.inf),
)


def size_bucket(num_gpus: int) -> str:
    """The label of the bucket ``num_gpus`` falls in."""
    for label, lo, hi in SIZE_BUCKETS:
        if lo <= num_gpus <= hi:
            return label
    raise ValueError(f"num_gpus must be >= 1, got {num_gpus}")


def percentiles(values: Sequence[float], qs: Sequence[float]) -> list[float]:
    """The ``qs``-th percentiles (0-100) with linear interpolation, as the simulator's metrics
    compute them (``numpy.percentile``), from one sort; zeros if ``values`` is empty."""
    if not values:
        return [0.0] * len(qs)
    return [float(x) for x in np.percentile(values, qs)]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), see :func:`percentiles`; 0 if empty."""
    return percentiles(values, (q,))[0]


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean; 0 if empty."""
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class Distribution:
    """Average, median and p99 of one quantity over a set of jobs (seconds)."""

    avg_s: float
    median_s: float
    p99_s: float

    @staticmethod
    def of(values: Sequence[float]) -> Distribution:
        median, p99 = percentiles(values, (50, 99))
        return Distribution(mean(values), median, p99)


@dataclass(frozen=True)
class GroupMetrics:
    """JCT, queueing and mean slowdown of a group of jobs (a size bucket)."""

    jobs: int
    jct: Distribution
    queue: Distribution
    mean_slowdown: float


@dataclass(frozen=True)
class AccountMetrics:
    """One account's share of the GPU-seconds and its jobs' mean slowdown."""

    jobs: int
    gpu_share: float
    mean_slowdown: float


@dataclass(frozen=True)
class ScheduleMetrics:
    """The row of one schedule: ``kind`` is "observed" or "simulated"."""

    name: str
    kind: str
    jobs: int
    jct: Distribution
    queue: Distribution
    mean_slowdown: float
    utilisation: float
    span_s: float
    per_account: dict[str, AccountMetrics] = field(default_factory=dict)
    by_size: dict[str, GroupMetrics] = field(default_factory=dict)


def _group(outcomes: Sequence[JobOutcome]) -> GroupMetrics:
    return GroupMetrics(
        jobs=len(outcomes),
        jct=Distribution.of([o.jct_s for o in outcomes]),
        queue=Distribution.of([o.queue_s for o in outcomes]),
        mean_slowdown=mean([o.slowdown for o in outcomes]),
    )


def summarise(
    name: str,
    kind: str,
    outcomes: Sequence[JobOutcome],
    *,
    total_gpus: int,
    busy_gpu_s: float | None = None,
) -> ScheduleMetrics:
    """The row of ``outcomes``. ``busy_gpu_s`` defaults to the sum of the jobs' GPU-seconds (a
    simulator that shares GPUs passes its own count, where a shared GPU counts once)."""
    if not outcomes:
        zero = Distribution(0.0, 0.0, 0.0)
        return ScheduleMetrics(name, kind, 0, zero, zero, 0.0, 0.0, 0.0)
    span = max(o.end_s for o in outcomes) - min(o.submit_s for o in outcomes)
    busy = sum(o.gpu_s for o in outcomes) if busy_gpu_s is None else busy_gpu_s
    util = busy / (total_gpus * span) if span > 0 and total_gpus > 0 else 0.0
    total_gpu_s = sum(o.gpu_s for o in outcomes)
    accounts: dict[str, list[JobOutcome]] = {}
    sizes: dict[str, list[JobOutcome]] = {}
    for o in outcomes:
        accounts.setdefault(o.account, []).append(o)
        sizes.setdefault(size_bucket(o.num_gpus), []).append(o)
    per_account = {
        a: AccountMetrics(
            jobs=len(os_),
            gpu_share=sum(o.gpu_s for o in os_) / total_gpu_s if total_gpu_s > 0 else 0.0,
            mean_slowdown=mean([o.slowdown for o in os_]),
        )
        for a, os_ in sorted(accounts.items())
    }
    by_size = {label: _group(sizes[label]) for label, _, _ in SIZE_BUCKETS if label in sizes}
    whole = _group(outcomes)
    return ScheduleMetrics(
        name=name, kind=kind, jobs=len(outcomes), jct=whole.jct, queue=whole.queue,
        mean_slowdown=whole.mean_slowdown, utilisation=util, span_s=span,
        per_account=per_account, by_size=by_size,
    )
