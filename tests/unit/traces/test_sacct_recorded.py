"""The accounting reader on sacct output recorded on the mini cluster (Slurm 22.05.8 and
24.11.5 with slurmdbd on MariaDB; ``tests/data/sacct/recorded/record.sh`` made them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from slurm_sched.traces.sacct import AccountedJob, read_sacct

RECORDED = Path(__file__).resolve().parents[2] / "data" / "sacct" / "recorded"
RELEASES = {"22.05": ("v0.0.38", "22.05.8"), "24.11": ("v0.0.42", "24.11.5")}


def comparable(job: AccountedJob, *, exit_code: bool = True) -> dict[str, object]:
    fields = dataclasses.asdict(job)
    del fields["line"]  # a line of text vs an index into the JSON list
    if not exit_code:
        del fields["exit_code"]
    return fields


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_both_formats_read_to_the_same_jobs(release: str) -> None:
    text = read_sacct(RECORDED / release / "sacct.txt")
    doc = read_sacct(RECORDED / release / "sacct.json")
    assert (text.format, doc.format) == ("parsable2", "json")
    assert (doc.data_parser, doc.slurm_version) == RELEASES[release]
    assert text.warnings == doc.warnings == []
    assert text.set_aside == doc.set_aside == {
        "cancelled before start": 1,  # cancelled in its first second: Start == End
        "requeued (earlier runs)": 1,  # requeued by an admin, waiting out its new begin time
        "still running": 1,
    }
    # 22.05's JSON gives the failed job's exit code as 0 where its text says 3:0 (the job-level
    # record of -X; 24.11 gives 3 in both)
    keep_exit = release != "22.05"
    assert [comparable(j, exit_code=keep_exit) for j in text.jobs] == [
        comparable(j, exit_code=keep_exit) for j in doc.jobs
    ]


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("name", ["sacct.txt", "sacct.json"])
def test_the_recorded_workload_reads_as_submitted(release: str, name: str) -> None:
    jobs = {j.job_id: j for j in read_sacct(RECORDED / release / name).jobs}
    assert sorted(jobs) == ["1", "2", "3", "4", "5", "6_0", "6_1", "6_2", "7"]
    gpus = {jid: (j.num_gpus, j.gpu_type, len(j.nodes)) for jid, j in jobs.items()}
    assert gpus == {
        "1": (1, None, 1), "2": (2, None, 1), "3": (4, None, 1),
        "4": (2, "a100", 1),  # --gres=gpu:a100:2: the only typed request
        "5": (8, None, 2),  # -N 2 --gres=gpu:4
        "6_0": (1, None, 1), "6_1": (1, None, 1), "6_2": (1, None, 1), "7": (1, None, 1),
    }  # fmt: skip
    assert jobs["1"].hints == {"model": "resnet50", "batch_size": 64}
    assert {j.account for j in jobs.values()} == {"alpha", "beta"}
    assert jobs["3"].time_limit_s == 600.0 and jobs["6_0"].time_limit_s == 120.0
    assert jobs["7"].state == "FAILED"
    assert all(j.partition == "direct" and j.user == "root" for j in jobs.values())
    assert all(0 <= j.wait_s < 60 and 0 <= j.run_s < 60 for j in jobs.values())
