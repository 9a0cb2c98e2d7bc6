"""The observed history as outcomes: what Slurm actually did with the jobs."""

from __future__ import annotations

from collections.abc import Iterable

from slurm_sched.advisor.outcomes import JobOutcome
from slurm_sched.advisor.records import AccountedJobLike, account_of


def observed_outcomes(jobs: Iterable[AccountedJobLike], origin_s: float) -> list[JobOutcome]:
    """Each job as it ran: JCT = end - submit, queueing = start - submit, running = end - start;
    times relative to ``origin_s``. The reference run time is the observed one (at least 1 s,
    as the simulator's ``duration_s``)."""
    out = []
    for j in jobs:
        run = max(0.0, j.end_s - j.start_s)
        out.append(JobOutcome(
            job_id=j.job_id,
            account=account_of(j),
            num_gpus=j.num_gpus,
            submit_s=j.submit_s - origin_s,
            start_s=j.start_s - origin_s,
            end_s=j.end_s - origin_s,
            executed_s=run,
            run_s=max(run, 1.0),
        ))
    return out


def busy_gpu_s(outcomes: Iterable[JobOutcome]) -> float:
    """GPU-seconds held by the jobs (each GPU of a job counts for the job's running time)."""
    return sum(o.gpu_s for o in outcomes)
