"""The simulator's progress model: how fast a running job advances.

A job's work is measured in *isolated seconds*: ``JobSpec.duration_s`` of work, done at rate 1.0
when the job runs alone on its requested GPUs of the reference type. The progress model returns
the rate for the job's current situation:

    rate = gpu_speed * plan_speed / sharing_slowdown

Each factor is a hook that later policies' performance models override: GPU generation
(Gandiva_fair), execution plan and resources (Rubick), co-location interference (SJF-BSBF's xi,
Muri's interleaving efficiency). The base class is the identity model: every factor is 1.

A rate may also change as the job advances on an unchanged situation (Pollux's statistical
efficiency moves with the epoch): ``rate_holds_until`` says how far the current rate holds, and
the simulator asks for a new one there.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurm_sched.model import Cluster, JobView, Placement


class ProgressModel:
    """Identity progress model: every job runs at its isolated speed whatever its situation."""

    def rate(
        self,
        job: JobView,
        placement: Placement,
        co_located: Sequence[JobView],
        cluster: Cluster,
    ) -> float:
        """Progress rate (isolated seconds per wall second) of ``job`` running on ``placement``.

        ``co_located`` holds the other RUNNING jobs that share at least one GPU with it.
        """
        r = self.gpu_speed(job, placement, cluster) * self.plan_speed(job, placement)
        if co_located:
            r /= self.sharing_slowdown(job, placement, co_located)
        return r

    def rate_holds_until(self, job: JobView, placement: Placement) -> float | None:
        """Work done (isolated seconds) up to which :meth:`rate` stays what it is now while the
        job runs on unchanged; past it the simulator asks again. ``None``: it holds to the end
        (the rate depends only on the job's situation, not on how far it is)."""
        return None

    def gpu_speed(self, job: JobView, placement: Placement, cluster: Cluster) -> float:
        """Speed-up of the placement's GPU generation over the reference type (1 = same)."""
        return 1.0

    def plan_speed(self, job: JobView, placement: Placement) -> float:
        """Speed-up of the job's settings (execution plan, GPU count) over its request."""
        return 1.0

    def sharing_slowdown(
        self, job: JobView, placement: Placement, co_located: Sequence[JobView]
    ) -> float:
        """Slow-down factor (>= 1) caused by the co-located jobs (1 = no interference)."""
        return 1.0


class UniformInterference(ProgressModel):
    """Every co-located pair slows each member by the same factor ``xi`` (SJF-BSBF's default)."""

    def __init__(self, xi: float = 1.5) -> None:
        if xi < 1.0:
            raise ValueError(f"xi must be >= 1, got {xi}")
        self.xi = xi

    def sharing_slowdown(
        self, job: JobView, placement: Placement, co_located: Sequence[JobView]
    ) -> float:
        return self.xi ** len(co_located)


PROGRESS_MODELS = {"identity": ProgressModel}
