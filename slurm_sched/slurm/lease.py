"""The fail-open lease on managed jobs: pure rules, no I/O.

The submit plugin (``plugin/job_submit.lua``) gives every managed job a begin time ``LEASE_S``
seconds ahead instead of holding it, so Slurm's own scheduler leaves the job alone until then. A
live scheduler keeps pushing the begin time of every job it has not started yet
(``scontrol update JobId=X StartTime=now+<lease_s>``) and starts a job by pinning its nodes with
``StartTime=now``. If the scheduler dies, nobody renews: the begin times pass and Slurm starts the
jobs itself (fail-open), at the latest ``lease_s`` after the last renewal plus one periodic pass
of Slurm's main scheduler (``SchedulerParameters=sched_interval``, 60 s by default) when nothing
else in the cluster triggers one sooner (the backfill pass skips quiet periods).

The rules (:meth:`Lease.due`): a pending managed job's begin time must stay within
``[now + renew_before_s, now + lease_s + slack_s]``. Below that window it is renewed (the lease
would run out before the next renewals had a chance); above it, it is shortened to the lease, so
that a job requeued by Slurm (begin time ``now + 121 s``) or submitted under a longer plugin
lease is also handed to Slurm within ``lease_s`` if the scheduler dies.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Slurm's default ``sched_interval``: on a quiet cluster a job whose begin time passed waits up
#: to this long for Slurm's periodic pass, a part of the fail-open delay no renewal can change.
SLURM_DEFAULT_SCHED_INTERVAL_S = 60.0


@dataclass(frozen=True)
class Lease:
    """How long a managed job is kept from Slurm's own scheduler, and when it is renewed.

    Args:
        lease_s: a renewed job's begin time is ``now + lease_s`` (whole seconds).
        renew_before_s: renew once less than this is left (default: half the lease, so a
            scheduler cycling every ``lease_s / 4`` renews each job about every ``lease_s / 2``
            and a single missed cycle never lets a lease run out).
        slack_s: a begin time up to this much beyond ``now + lease_s`` is left alone (a job
            renewed a moment ago by another cycle is not renewed again).
    """

    lease_s: float
    renew_before_s: float | None = None
    slack_s: float = 5.0

    def __post_init__(self) -> None:
        if not self.lease_s >= 1:
            raise ValueError(f"lease_s must be >= 1 s, got {self.lease_s}")
        if self.renew_before_s is not None and not 0 < self.renew_before_s < self.lease_s:
            raise ValueError(
                f"renew_before_s must be in (0, lease_s={self.lease_s}), got {self.renew_before_s}"
            )
        if self.slack_s < 0:
            raise ValueError(f"slack_s must be >= 0, got {self.slack_s}")

    @property
    def seconds(self) -> int:
        """The lease as scontrol gets it (whole seconds)."""
        return round(self.lease_s)

    @property
    def renew_window_s(self) -> float:
        return self.renew_before_s if self.renew_before_s is not None else self.lease_s / 2

    def due(self, begin_s: float, now_s: float) -> bool:
        """Whether a pending job whose begin time is ``begin_s`` needs a fresh lease now.

        ``begin_s`` <= 0 (Slurm has no begin time: eligible at once) is due as well.
        """
        too_soon = begin_s < now_s + self.renew_window_s
        too_late = begin_s > now_s + self.lease_s + self.slack_s
        return too_soon or too_late

    def start_time_arg(self) -> str:
        """The ``scontrol update`` field that (re)sets the lease."""
        return f"StartTime=now+{self.seconds}"

    def renew_argv(self, job_id: str) -> tuple[str, ...]:
        """``scontrol`` arguments that give ``job_id`` a fresh lease."""
        return ("update", f"JobId={job_id}", self.start_time_arg())
