"""One job's outcome under one schedule (observed or simulated), on the simulation's timeline.

Every metric, the validation and the resampling are computed from these records, so the observed
history and each simulated policy are measured the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slurm_sched.model import CompletedJob


@dataclass(frozen=True)
class JobOutcome:
    """A finished job. Times are seconds since the accounting's first submit.

    ``executed_s`` is the time the job spent running (its observed run time, or the simulator's
    accounting of it, which excludes time spent preempted); ``run_s`` the reference run time
    that slowdown divides by (the observed run time, at least 1 s).
    """

    job_id: str
    account: str
    num_gpus: int
    submit_s: float
    start_s: float
    end_s: float
    executed_s: float
    run_s: float

    @property
    def jct_s(self) -> float:
        """Job completion time: end - submit."""
        return self.end_s - self.submit_s

    @property
    def queue_s(self) -> float:
        """Time not running between submit and end (start - submit when never preempted)."""
        return max(0.0, self.jct_s - self.executed_s)

    @property
    def slowdown(self) -> float:
        """JCT / run time (1 = the job never waited)."""
        return self.jct_s / self.run_s

    @property
    def gpu_s(self) -> float:
        """GPU-seconds the job held: GPUs x time running."""
        return self.num_gpus * self.executed_s


def from_completed(records: Iterable[CompletedJob]) -> list[JobOutcome]:
    """The simulator's records as outcomes (the spec's user is the account)."""
    return [
        JobOutcome(
            job_id=c.spec.job_id,
            account=c.spec.user,
            num_gpus=c.spec.num_gpus,
            submit_s=c.spec.submit_time_s,
            start_s=c.first_start_s,
            end_s=c.finish_s,
            executed_s=c.executed_s,
            run_s=c.spec.duration_s,
        )
        for c in records
    ]
