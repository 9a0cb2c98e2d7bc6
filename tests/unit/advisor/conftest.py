"""A private test double of the accounting reader's records (``slurm_sched.traces.sacct``'s
``AccountedJob`` and ``Accounting``), with the documented fields, and builders of histories."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from slurm_sched.advisor.cluster_shape import cluster_shape
from slurm_sched.advisor.pipeline import Advice, advise
from slurm_sched.advisor.sources import Reader
from slurm_sched.errors import TraceFormatError
from slurm_sched.model import JobSpec

DAY = 86400.0
#: A Monday, 00:00 UTC.
T0 = 1_717_372_800.0


@dataclass(frozen=True)
class FakeAccountedJob:
    job_id: str
    user: str
    account: str
    partition: str
    qos: str
    state: str
    exit_code: int | None
    submit_s: float
    eligible_s: float
    start_s: float
    end_s: float
    time_limit_s: float | None
    num_gpus: int
    gpu_type: str | None
    nodes: tuple[str, ...]
    hints: dict[str, object]
    line: int

    @property
    def wait_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def run_s(self) -> float:
        return self.end_s - self.start_s

    def to_spec(self, origin_s: float) -> JobSpec:
        return JobSpec(
            job_id=self.job_id, submit_time_s=self.submit_s - origin_s,
            duration_s=max(self.run_s, 1.0), num_gpus=self.num_gpus, gpu_type=self.gpu_type,
            time_limit_s=self.time_limit_s, user=self.account or self.user,
            attrs={"user": self.user, "account": self.account, "partition": self.partition,
                   "qos": self.qos, "state": self.state, "exit_code": self.exit_code,
                   "observed_start_s": self.start_s - origin_s,
                   "observed_end_s": self.end_s - origin_s,
                   "eligible_s": self.eligible_s - origin_s, "nodes": list(self.nodes)},
        )


@dataclass
class FakeAccounting:
    jobs: list[FakeAccountedJob]
    set_aside: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    source: str = "fake.sacct"
    format: str = "parsable2"
    data_parser: str | None = None
    slurm_version: str | None = None

    @property
    def origin_s(self) -> float:
        return min(j.submit_s for j in self.jobs)

    def specs(self) -> list[JobSpec]:
        return [j.to_spec(self.origin_s) for j in self.jobs]


def acc_job(job_id: str, submit: float, start: float, end: float, gpus: int = 1,
            account: str = "a", partition: str = "gpu", line: int = 0,
            time_limit_s: float | None = None) -> FakeAccountedJob:
    """A job; times in seconds after :data:`T0`."""
    return FakeAccountedJob(
        job_id=job_id, user=f"u-{account}", account=account, partition=partition, qos="normal",
        state="COMPLETED", exit_code=0, submit_s=T0 + submit, eligible_s=T0 + submit,
        start_s=T0 + start, end_s=T0 + end, time_limit_s=time_limit_s, num_gpus=gpus,
        gpu_type=None, nodes=("n1",), hints={}, line=line)


def history(days: int = 3) -> FakeAccounting:
    """Each day on a 4-GPU node, as FIFO ran it: a 4-GPU 2-hour job of account "big", then five
    1-GPU 10-minute jobs of account "small" that waited for it."""
    jobs = []
    for d in range(days):
        base = d * DAY
        jobs.append(acc_job(f"{d}0", base, base, base + 7200, gpus=4, account="big",
                            time_limit_s=10800))
        for k in range(1, 6):
            sub = base + 60 * k
            start = base + 7200 + 600 * ((k - 1) // 4)
            jobs.append(acc_job(f"{d}{k}", sub, start, start + 600, account="small",
                                time_limit_s=1800))
    return FakeAccounting(jobs, set_aside={"cancelled before start": 2},
                          warnings=["fake.sacct:9: field 'Start' = 'x': not a time"])


def write_history(path: Path, acc: FakeAccounting) -> Path:
    """The test reader's file format: JSON of the jobs' fields."""
    path.write_text(json.dumps([{k: v for k, v in vars(j).items()} for j in acc.jobs]))
    return path


def read_history(path: str | Path) -> FakeAccounting:
    try:
        rows = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise TraceFormatError("not a history", source=str(path), line=e.lineno) from None
    jobs = [FakeAccountedJob(**{**r, "nodes": tuple(r["nodes"])}) for r in rows]
    if not jobs:
        raise TraceFormatError("no usable job", source=str(path))
    return FakeAccounting(jobs, source=str(path))


def fake_argv(since: str, *, partition: str | None = None, json: bool = False) -> list[str]:
    return ["sacct", "-X", "-a", "-P", f"--starttime=now-{since}"]


@pytest.fixture
def fake_reader() -> Reader:
    return Reader(read=read_history, argv=fake_argv)


def make_advice(days: int = 3, resamples: int = 50) -> Advice:
    """The advice on :func:`history` over one 4-GPU node, fifo standing in for the baseline."""
    return advise(history(days), cluster_shape(spec="1x4"), policies=["tiresias", "sjf"],
                  baseline="fifo", resamples=resamples, seed=0)
