"""The accounting reader on ``sacct --json``: one constructed fixture per data_parser version
(``tests/data/sacct/README.md``) reads to the same jobs; both shapes of every number; job ids of
arrays and heterogeneous jobs; malformed jobs."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from slurm_sched.errors import TraceFormatError
from slurm_sched.traces.sacct import AccountedJob, read_sacct
from slurm_sched.traces.sacct_json import number
from slurm_sched.traces.sacct_rules import Malformed

DATA = Path(__file__).resolve().parents[2] / "data" / "sacct"
T0 = 1714557600.0
VERSIONS = {
    "v0.0.38": "22.05.11",
    "v0.0.39": "23.02.8",
    "v0.0.40": "23.11.11",
    "v0.0.41": "24.05.8",
    "v0.0.42": "24.11.6",
    "v0.0.43": "25.05.3",
    "v0.0.44": "25.11.0",
}

EXPECTED = [
    AccountedJob(
        job_id="101",
        user="alice",
        account="vision",
        partition="gpu",
        qos="normal",
        state="COMPLETED",
        exit_code=0,
        submit_s=T0,
        eligible_s=T0,
        start_s=T0 + 600,
        end_s=T0 + 4200,
        time_limit_s=7200.0,
        num_gpus=4,
        gpu_type=None,  # allocated on A100s, asked for any GPU
        nodes=("gpu01", "gpu02"),
        hints={"model": "resnet50", "batch_size": 256},
        line=0,
    ),
    AccountedJob(
        job_id="111",
        user="erin",
        account="speech",
        partition="gpu",
        qos="normal",
        state="TIMEOUT",
        exit_code=0,
        submit_s=T0 + 20,
        eligible_s=T0 + 20,
        start_s=T0 + 30,
        end_s=T0 + 3630,
        time_limit_s=3600.0,
        num_gpus=8,
        gpu_type=None,
        nodes=("gpu05", "gpu06"),
        hints={},
        line=6,
    ),
    AccountedJob(
        job_id="102_3",
        user="bob",
        account="nlp",
        partition="gpu",
        qos="normal",
        state="FAILED",
        exit_code=1,
        submit_s=T0 + 60,
        eligible_s=T0 + 120,
        start_s=T0 + 900,
        end_s=T0 + 1500,
        time_limit_s=None,
        num_gpus=1,
        gpu_type="v100",
        nodes=("gpu03",),
        hints={},
        line=1,
    ),
]
SET_ASIDE = {"cancelled before start": 1, "still running": 1, "no GPU": 1, "pending": 1}


def load(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{version}.json").read_text())
    return data


def dump(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "sacct.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("version", "release"), VERSIONS.items())
def test_every_version_reads_to_the_same_jobs(version: str, release: str) -> None:
    acct = read_sacct(DATA / f"{version}.json")
    assert acct.format == "json"
    assert (acct.data_parser, acct.slurm_version) == (version, release)
    assert acct.jobs == EXPECTED
    assert acct.set_aside == SET_ASIDE
    assert acct.warnings == [] and acct.steps_ignored == 0


def test_the_fixtures_cover_every_version() -> None:
    assert sorted(p.stem for p in DATA.glob("*.json")) == sorted(VERSIONS)


def _as_objects(value: Any) -> Any:
    """Every integer below a dict key in ``time`` as ``{"set", "infinite", "number"}``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    return {"set": value != 0, "infinite": False, "number": value}


def test_times_as_set_number_objects_read_the_same(tmp_path: Path) -> None:
    data = load("v0.0.44")
    for job in data["jobs"]:
        for key in ("submission", "eligible", "start", "end"):
            job["time"][key] = _as_objects(job["time"][key])
        for item in job["tres"]["allocated"] + job["tres"]["requested"]:
            item["count"] = _as_objects(item["count"])
    assert read_sacct(dump(tmp_path, data)).jobs == EXPECTED


def test_plain_integers_read_the_same_in_a_new_layout(tmp_path: Path) -> None:
    data = load("v0.0.40")
    for job in data["jobs"]:
        job["time"]["limit"] = number(job["time"]["limit"], "time.limit") or 0xFFFFFFFF
        job["exit_code"] = number(job["exit_code"]["return_code"], "exit_code")
        job["state"]["current"] = job["state"]["current"][0]
        job["array"]["task_id"] = number(job["array"]["task_id"], "array.task_id")
    assert read_sacct(dump(tmp_path, data)).jobs == EXPECTED


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, 5),
        (5.0, 5),
        (None, None),
        ({"set": True, "infinite": False, "number": 7}, 7),
        ({"set": False, "infinite": False, "number": 0}, None),
        ({"set": True, "infinite": True, "number": 0}, None),
    ],
)
def test_number_shapes(value: object, expected: int | None) -> None:
    assert number(value, "f") == expected


@pytest.mark.parametrize("value", [True, "5", 1.5, [1], {"set": True, "number": "x"}])
def test_number_rejects_the_rest(value: object) -> None:
    with pytest.raises(Malformed):
        number(value, "f")


def test_a_heterogeneous_job_component_and_a_requeued_flag(tmp_path: Path) -> None:
    data = load("v0.0.41")
    het = copy.deepcopy(data["jobs"][0])
    het["job_id"] = 301
    het["het"] = {"job_id": 300, "job_offset": {"set": True, "infinite": False, "number": 1}}
    requeued = copy.deepcopy(data["jobs"][0])
    requeued["state"]["current"] = ["PENDING", "REQUEUED"]
    data["jobs"] = [requeued, het]
    acct = read_sacct(dump(tmp_path, data))
    assert [j.job_id for j in acct.jobs] == ["300+1"]
    assert acct.set_aside == {"requeued (earlier runs)": 1}


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        (("state", "current"), ["SLEEPING"], "state.current", "not a Slurm job state"),
        (("state", "current"), 3, "state.current", "not a Slurm job state"),
        (("time", "start"), "noon", "time.start", "not a number"),
        (("time", "submission"), 0, "time.submission", "missing value"),
        (("time", "end"), 1714557601, "time.end", "before time.start"),
        (("tres", "allocated"), "gres/gpu=2", "tres.allocated", "not a TRES list"),
        (("time", "limit"), "1:00:00", "time.limit", "not a number"),
        (("nodes",), "gpu[01-", "nodes", "not a host list"),
        (("user",), 7, "user", "not a string"),
        (("job_id",), 0, "job_id", "missing value"),
    ],
)
def test_each_malformed_job_is_one_warning(
    tmp_path: Path, path: tuple[str, ...], value: object, field: str, message: str
) -> None:
    data = load("v0.0.42")
    target = data["jobs"][1]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    file = dump(tmp_path, data)
    acct = read_sacct(file)
    assert [j.job_id for j in acct.jobs] == ["101", "111"]
    assert acct.set_aside == {**SET_ASIDE, "malformed": 1}
    assert len(acct.warnings) == 1
    assert acct.warnings[0].startswith(f"{file}: jobs[1]: field '{field}' = {value!r}: ")
    assert message in acct.warnings[0]


def test_a_job_that_is_not_an_object_is_one_warning(tmp_path: Path) -> None:
    data = load("v0.0.43")
    data["jobs"].append("oops")
    acct = read_sacct(dump(tmp_path, data))
    assert acct.warnings == [f"{tmp_path / 'sacct.json'}: jobs[7]: field 'job' = 'oops': "
                             "not a JSON object"]


def test_unreadable_hints_warn_and_keep_the_job(tmp_path: Path) -> None:
    data = load("v0.0.40")
    data["jobs"][0]["comment"]["job"] = '{"model": 5}'
    file = dump(tmp_path, data)
    acct = read_sacct(file)
    assert acct.jobs[0].job_id == "101" and acct.jobs[0].hints == {}
    assert acct.warnings == [
        f"{file}: jobs[0]: hint 'model' = 5: must be a string (job kept without hints)"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"meta": {}}', "no 'jobs' list"),
        ('{"jobs": []}', "no usable job in 0 record(s)"),
    ],
)
def test_files_that_cannot_be_read(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=re.escape(message)) as err:
        read_sacct(path)
    assert str(path) in str(err.value)


def test_meta_without_release_or_parser(tmp_path: Path) -> None:
    data = load("v0.0.38")
    del data["meta"]["Slurm"]["release"]
    data["meta"]["plugin"] = {}
    acct = read_sacct(dump(tmp_path, data))
    assert (acct.data_parser, acct.slurm_version) == (None, "22.05.11")
