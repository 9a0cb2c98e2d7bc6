"""The records of Slurm's accounting as the simulator reads them: one :class:`AccountedJob` per
job allocation and the :class:`Accounting` of a whole ``sacct`` file (see
``docs/accounting-input.md``). The readers are ``traces/sacct_text.py`` and
``traces/sacct_json.py``; the entry point is :func:`slurm_sched.traces.sacct.read_sacct`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slurm_sched.model.job import JobSpec

#: Hints that become :class:`JobSpec` fields in :meth:`AccountedJob.to_spec`; the other hints
#: (``plans``, ``tickets``, ``guaranteed``, ``duration_s``) go to ``attrs``.
_SPEC_HINTS = ("model", "batch_size", "iterations", "stage_times_ms")


@dataclass(frozen=True, slots=True)
class AccountedJob:
    """One job allocation from Slurm's accounting (``sacct -X``); times are epoch seconds."""

    job_id: str  # "123", or "123_4" for array task 4 of array 123
    user: str
    account: str  # "" when accounting has none
    partition: str
    qos: str
    state: str  # Slurm's base state, upper case: COMPLETED, FAILED, TIMEOUT, CANCELLED, ...
    exit_code: int | None
    submit_s: float
    eligible_s: float
    start_s: float
    end_s: float
    time_limit_s: float | None  # None = unlimited / not given
    num_gpus: int  # from AllocTRES, else ReqTRES (gres/gpu or sum of gres/gpu:<type>)
    gpu_type: str | None
    nodes: tuple[str, ...]  # expanded host list
    hints: dict[str, object]  # hints parsed from the Comment (protocol/hints.py), {} if none
    line: int  # line (text) or job index (json) it came from, for messages

    @property
    def wait_s(self) -> float:
        """Seconds from submission to start."""
        return self.start_s - self.submit_s

    @property
    def run_s(self) -> float:
        """Seconds from start to end (0 for a job that ended the second it started)."""
        return self.end_s - self.start_s

    def to_spec(self, origin_s: float) -> JobSpec:
        """The job as the simulator replays it, with times relative to ``origin_s``.

        ``submit_time_s = submit_s - origin_s``; ``duration_s = max(run_s, 1.0)`` (the observed
        run, at least one second since a JobSpec needs a positive duration); ``user`` is the
        account, else the user, else ``default``; hints ``model``, ``batch_size``,
        ``iterations`` and ``stage_times_ms`` become fields, the other hints go to ``attrs``
        (``plans`` as a tuple, ``tickets``, ``guaranteed``, ``hint_duration_s``). ``attrs`` also
        holds what accounting observed: ``user``, ``account``, ``partition``, ``qos``,
        ``state``, ``exit_code``, ``observed_start_s``, ``observed_end_s``, ``eligible_s`` (all
        three relative to ``origin_s``) and ``nodes`` (a list).
        """
        attrs: dict[str, Any] = {
            "user": self.user,
            "account": self.account,
            "partition": self.partition,
            "qos": self.qos,
            "state": self.state,
            "exit_code": self.exit_code,
            "observed_start_s": self.start_s - origin_s,
            "observed_end_s": self.end_s - origin_s,
            "eligible_s": self.eligible_s - origin_s,
            "nodes": list(self.nodes),
        }
        hints: dict[str, Any] = self.hints
        if "plans" in hints:
            attrs["plans"] = tuple(hints["plans"])
        for key in ("tickets", "guaranteed"):
            if key in hints:
                attrs[key] = hints[key]
        if "duration_s" in hints:
            attrs["hint_duration_s"] = hints["duration_s"]
        fields: dict[str, Any] = {k: hints[k] for k in _SPEC_HINTS if k in hints}
        if "stage_times_ms" in fields:
            fields["stage_times_ms"] = tuple(fields["stage_times_ms"])
        return JobSpec(
            job_id=self.job_id,
            submit_time_s=self.submit_s - origin_s,
            num_gpus=self.num_gpus,
            duration_s=max(self.run_s, 1.0),
            user=self.account or self.user or "default",
            gpu_type=self.gpu_type,
            time_limit_s=self.time_limit_s,
            attrs=attrs,
            **fields,
        )


@dataclass
class Accounting:
    """What one ``sacct`` file holds: the usable jobs and a count of the records set aside.

    ``set_aside`` maps a documented reason (``"pending"``, ``"still running"``, ``"requeued
    (earlier runs)"``, ``"cancelled before start"``, ``"ended without starting"``, ``"no
    GPU"``, ``"duplicate job id"``, ``"malformed"``) to a count; only reasons that occurred are
    keys. ``warnings`` holds one line per malformed record and per unreadable hint.
    """

    jobs: list[AccountedJob]  # usable jobs, sorted by (submit_s, job_id)
    set_aside: dict[str, int]  # documented reason -> count
    warnings: list[str]  # "FILE:LINE: field 'Start' = 'xyz': not a time"
    source: str
    format: str  # "json" or "parsable2"
    data_parser: str | None  # e.g. "v0.0.40" for JSON when known
    slurm_version: str | None  # from meta.slurm.version when JSON
    #: job steps (``123.batch``, ``123.0``) skipped: they are parts of a job, not jobs
    steps_ignored: int = field(default=0)

    @property
    def origin_s(self) -> float:
        """The earliest submit time of the usable jobs (0.0 when there are none)."""
        return min((j.submit_s for j in self.jobs), default=0.0)

    def specs(self) -> list[JobSpec]:
        """The usable jobs as JobSpecs, times relative to :attr:`origin_s`, in job order."""
        origin = self.origin_s
        return [j.to_spec(origin) for j in self.jobs]
