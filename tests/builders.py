"""Test builders: short ways to make jobs, snapshots and placements."""

from __future__ import annotations

from slurm_sched.model import JobSpec, Placement


def job(job_id: str, submit: float, gpus: int, duration: float, **kw) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=submit, num_gpus=gpus, duration_s=duration, **kw)


def place(**nodes: list[int]) -> Placement:
    """``place(**{"node-1": [0, 1]})`` -> Placement."""
    return Placement.of(nodes)
