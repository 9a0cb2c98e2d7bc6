"""Reading the accounting from a file or from sacct run here; the partition filter."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.advisor.sources import Reader, from_file, from_sacct, in_partition
from slurm_sched.errors import InputError, SlurmCommandError
from tests.unit.advisor.conftest import acc_job, history, write_history


def test_from_file(tmp_path: Path, fake_reader: Reader) -> None:
    path = write_history(tmp_path / "h.json", history(1))
    assert len(from_file(fake_reader, path).jobs) == 6
    with pytest.raises(InputError, match="no such file"):
        from_file(fake_reader, tmp_path / "missing")


def test_from_sacct_runs_the_readers_command(tmp_path: Path, fake_reader: Reader) -> None:
    text = write_history(tmp_path / "h.json", history(1)).read_text()
    calls: list[list[str]] = []

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, text, "")

    acc = from_sacct(fake_reader, "7d", partition="gpu", run=run)
    assert len(acc.jobs) == 6
    assert calls == [["sacct", "-X", "-a", "-P", "--starttime=now-7d"]]

    def fails(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, "", "sacct: error: bad time")

    with pytest.raises(SlurmCommandError, match="bad time"):
        from_sacct(fake_reader, "7d", run=fails)

    def missing(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(2, "No such file or directory", "sacct")

    with pytest.raises(InputError, match="cannot run sacct"):
        from_sacct(fake_reader, "7d", run=missing)


def test_in_partition() -> None:
    jobs = [acc_job("1", 0, 0, 1, partition="gpu"), acc_job("2", 0, 0, 1, partition="cpu"),
            acc_job("3", 0, 0, 1, partition="cpu,gpu")]
    kept, other = in_partition(jobs, "gpu")
    assert [j.job_id for j in kept] == ["1", "3"] and other == 1
    assert in_partition(jobs, None) == (jobs, 0)
