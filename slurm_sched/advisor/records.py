"""What the advisor reads of Slurm's accounting: structural types for the accounting reader.

The reader (``slurm_sched.traces.sacct``: ``AccountedJob`` and ``Accounting``) satisfies these
protocols as it is; so does any object with the same attributes (the tests' doubles). Only the
attributes listed here are read. Times are epoch seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from slurm_sched.model import JobSpec


class AccountedJobLike(Protocol):
    """One job allocation from ``sacct -X`` (see ``slurm_sched.traces.sacct.AccountedJob``)."""

    @property
    def job_id(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def account(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def submit_s(self) -> float: ...
    @property
    def start_s(self) -> float: ...
    @property
    def end_s(self) -> float: ...
    @property
    def num_gpus(self) -> int: ...

    def to_spec(self, origin_s: float) -> JobSpec:
        """The job as the simulator runs it, its times relative to ``origin_s``."""
        ...


class AccountingLike(Protocol):
    """A whole accounting file: its usable jobs, sorted by submit time, and what was set aside."""

    @property
    def jobs(self) -> Sequence[AccountedJobLike]: ...
    @property
    def set_aside(self) -> Mapping[str, int]: ...
    @property
    def warnings(self) -> Sequence[str]: ...
    @property
    def source(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def origin_s(self) -> float:
        """The first submit time of the usable jobs (the simulation's time 0)."""
        ...


def account_of(job: AccountedJobLike) -> str:
    """The tenant a job is counted under: its account, else its user (as ``to_spec`` does)."""
    return job.account or job.user
