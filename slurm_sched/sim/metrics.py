"""Metrics of one simulated (or real) run, computed from completed-job records."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from slurm_sched.model import CompletedJob


class TenantMetrics(BaseModel):
    model_config = ConfigDict(frozen=True)

    jobs: int
    avg_jct_s: float
    avg_queue_s: float
    gpu_time_s: float


class RunMetrics(BaseModel):
    """The results table row of one policy. Field names are the JSON output's keys."""

    model_config = ConfigDict(frozen=True)

    policy: str
    jobs: int
    avg_jct_s: float
    median_jct_s: float
    p99_jct_s: float
    avg_queue_s: float
    makespan_s: float
    gpu_util: float
    lower_bound_jct_s: float
    preemptions: int = 0
    rejected_jobs: int = 0
    per_tenant: dict[str, TenantMetrics] = {}


def compute_metrics(
    policy: str,
    completed: Sequence[CompletedJob],
    *,
    total_gpus: int,
    busy_gpu_s: float,
    rejected_jobs: int = 0,
) -> RunMetrics:
    """Aggregate completed-job records.

    - JCT = finish - submit; queueing = JCT - time spent running (so it includes waits after
      preemptions); p99 uses linear interpolation.
    - makespan = last finish - first submit.
    - GPU utilisation = GPU-seconds with at least one running job / (GPUs x makespan).
    - lower bound = mean isolated run time (every job starts at submit and never waits).
    """
    if not completed:
        return RunMetrics(
            policy=policy, jobs=0, avg_jct_s=0, median_jct_s=0, p99_jct_s=0, avg_queue_s=0,
            makespan_s=0, gpu_util=0, lower_bound_jct_s=0, rejected_jobs=rejected_jobs,
        )
    jct = np.array([c.jct_s for c in completed])
    queue = np.array([c.queue_s for c in completed])
    first_submit = min(c.spec.submit_time_s for c in completed)
    makespan = max(c.finish_s for c in completed) - first_submit
    tenants: dict[str, list[CompletedJob]] = {}
    for c in completed:
        tenants.setdefault(c.spec.user, []).append(c)
    per_tenant = {
        u: TenantMetrics(
            jobs=len(cs),
            avg_jct_s=float(np.mean([c.jct_s for c in cs])),
            avg_queue_s=float(np.mean([c.queue_s for c in cs])),
            gpu_time_s=float(sum(c.executed_s * c.spec.num_gpus for c in cs)),
        )
        for u, cs in sorted(tenants.items())
    }
    return RunMetrics(
        policy=policy,
        jobs=len(completed),
        avg_jct_s=float(jct.mean()),
        median_jct_s=float(np.median(jct)),
        p99_jct_s=float(np.percentile(jct, 99)),
        avg_queue_s=float(queue.mean()),
        makespan_s=float(makespan),
        gpu_util=float(busy_gpu_s / (total_gpus * makespan)) if makespan > 0 else 0.0,
        lower_bound_jct_s=float(np.mean([c.spec.duration_s for c in completed])),
        preemptions=sum(c.preemptions for c in completed),
        rejected_jobs=rejected_jobs,
        per_tenant=per_tenant,
    )
