"""The accounting reader on ``sacct -P`` text: columns in any order, steps, arrays, every
set-aside rule, every warning kind, GPU TRES, time limits, hints, ``to_spec`` and
``sacct_argv``; a property test writes random records and reads them back."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_sched.errors import InputError, TraceFormatError
from slurm_sched.traces.sacct import SACCT_COLUMNS, AccountedJob, read_sacct, sacct_argv
from slurm_sched.traces.sacct_rules import Malformed
from slurm_sched.traces.sacct_text import parse_time_limit, parse_tres

T0 = 1714557600  # 2024-05-01T10:00:00Z


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Read every file in UTC, so the expected epoch seconds do not depend on the machine."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TZ", "UTC")
    time.tzset()
    yield
    mp.undo()
    time.tzset()


def iso(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")


def row(**over: str) -> dict[str, str]:
    """One completed 2-GPU job; keyword arguments replace cells."""
    cells = {
        "JobID": "100",
        "JobIDRaw": "100",
        "User": "alice",
        "Account": "vision",
        "Partition": "gpu",
        "QOS": "normal",
        "State": "COMPLETED",
        "ExitCode": "0:0",
        "Submit": iso(T0),
        "Eligible": iso(T0 + 10),
        "Start": iso(T0 + 100),
        "End": iso(T0 + 1100),
        "Timelimit": "02:00:00",
        "AllocTRES": "billing=8,cpu=8,gres/gpu=2,mem=32G,node=1",
        "ReqTRES": "billing=8,cpu=8,gres/gpu=2,mem=32G,node=1",
        "NodeList": "gpu01",
        "Comment": "",
    }
    cells.update(over)
    return cells


def write(
    tmp_path: Path, rows: list[dict[str, str]], columns: tuple[str, ...] = SACCT_COLUMNS
) -> Path:
    path = tmp_path / "sacct.txt"
    lines = ["|".join(columns)] + ["|".join(r.get(c, "") for c in columns) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


# ------------------------------------------------------------------------------------- basics


def test_a_completed_job_reads_with_every_field(tmp_path: Path) -> None:
    acct = read_sacct(write(tmp_path, [row(Comment='{"model":"resnet50","batch_size":64}')]))
    assert acct.format == "parsable2" and acct.data_parser is None and acct.warnings == []
    assert acct.jobs == [
        AccountedJob(
            job_id="100",
            user="alice",
            account="vision",
            partition="gpu",
            qos="normal",
            state="COMPLETED",
            exit_code=0,
            submit_s=T0,
            eligible_s=T0 + 10,
            start_s=T0 + 100,
            end_s=T0 + 1100,
            time_limit_s=7200.0,
            num_gpus=2,
            gpu_type=None,
            nodes=("gpu01",),
            hints={"model": "resnet50", "batch_size": 64},
            line=2,
        )
    ]
    job = acct.jobs[0]
    assert (job.wait_s, job.run_s) == (100, 1000)


def test_columns_in_any_order_read_the_same(tmp_path: Path) -> None:
    rows = [row(), row(JobID="101", JobIDRaw="101", NodeList="gpu[01-02]")]
    expected = read_sacct(write(tmp_path, rows)).jobs
    rng = random.Random(7)
    for _ in range(5):
        columns = list(SACCT_COLUMNS)
        rng.shuffle(columns)
        assert read_sacct(write(tmp_path, rows, tuple(columns))).jobs == expected


def test_optional_columns_may_be_absent_and_sacct_p_trailing_bar_reads(tmp_path: Path) -> None:
    columns = tuple(c for c in SACCT_COLUMNS if c not in ("JobIDRaw", "Comment"))
    path = tmp_path / "p.txt"
    r = row()
    path.write_text("|".join(columns) + "|\n" + "|".join(r[c] for c in columns) + "|\n")
    acct = read_sacct(path)
    assert [j.job_id for j in acct.jobs] == ["100"] and acct.warnings == []


def test_steps_are_ignored(tmp_path: Path) -> None:
    rows = [row(), row(JobID="100.batch"), row(JobID="100.extern"), row(JobID="100.0")]
    acct = read_sacct(write(tmp_path, rows))
    assert [j.job_id for j in acct.jobs] == ["100"]
    assert acct.steps_ignored == 3 and acct.set_aside == {}


def test_array_tasks_are_jobs_and_an_unsplit_array_is_pending(tmp_path: Path) -> None:
    rows = [
        row(JobID="200_4", JobIDRaw="204"),
        row(JobID="200_[5-9%2]", JobIDRaw="200", State="PENDING", Start="Unknown", End="Unknown"),
    ]
    acct = read_sacct(write(tmp_path, rows))
    assert [j.job_id for j in acct.jobs] == ["200_4"]
    assert acct.set_aside == {"pending": 1}


def test_jobs_are_sorted_by_submit_time_then_id(tmp_path: Path) -> None:
    rows = [row(JobID="3", Submit=iso(T0 + 5)), row(JobID="2"), row(JobID="1")]
    assert [j.job_id for j in read_sacct(write(tmp_path, rows)).jobs] == ["1", "2", "3"]


# ---------------------------------------------------------------------------------- set aside

_CANCELLED = "cancelled before start"


@pytest.mark.parametrize(
    ("cells", "reason"),
    [
        ({"State": "PENDING", "Start": "Unknown", "End": "Unknown"}, "pending"),
        ({"State": "REQUEUED"}, "requeued (earlier runs)"),
        ({"State": "RUNNING", "End": "Unknown"}, "still running"),
        ({"State": "COMPLETED", "End": "Unknown"}, "still running"),
        ({"State": "CANCELLED by 1000", "Start": "Unknown"}, "cancelled before start"),
        ({"State": "CANCELLED by 0", "Start": "None"}, "cancelled before start"),
        ({"State": "CANCELLED", "Start": iso(T0 + 50), "End": iso(T0 + 50)}, _CANCELLED),
        ({"State": "CANCELLED", "Start": iso(T0 + 60), "End": iso(T0 + 50)}, _CANCELLED),
        ({"State": "FAILED", "Start": "Unknown"}, "ended without starting"),
        ({"AllocTRES": "cpu=4,mem=8G,node=1", "ReqTRES": "cpu=4,mem=8G,node=1"}, "no GPU"),
        ({"AllocTRES": "cpu=4,gres/gpumem=40G", "ReqTRES": ""}, "no GPU"),
    ],
)
def test_each_set_aside_rule(tmp_path: Path, cells: dict[str, str], reason: str) -> None:
    acct = read_sacct(write(tmp_path, [row(JobID="1"), row(JobID="2", **cells)]))
    assert [j.job_id for j in acct.jobs] == ["1"]
    assert acct.set_aside == {reason: 1}
    assert acct.warnings == []


def test_a_second_record_of_the_same_job_id_is_set_aside(tmp_path: Path) -> None:
    acct = read_sacct(write(tmp_path, [row(), row(User="bob")]))
    assert [j.user for j in acct.jobs] == ["alice"]
    assert acct.set_aside == {"duplicate job id": 1}


@pytest.mark.parametrize(
    "state",
    ["COMPLETED", "FAILED", "TIMEOUT", "CANCELLED by 1000", "NODE_FAIL", "OUT_OF_MEMORY",
     "PREEMPTED", "BOOT_FAIL", "DEADLINE"],
)
def test_a_job_that_started_and_ended_is_usable(tmp_path: Path, state: str) -> None:
    acct = read_sacct(write(tmp_path, [row(State=state)]))
    assert acct.jobs[0].state == state.split()[0]


def test_requeued_earlier_runs_leave_the_last_run(tmp_path: Path) -> None:
    rows = [
        row(State="REQUEUED", Start=iso(T0 + 100), End=iso(T0 + 200)),
        row(State="COMPLETED", Start=iso(T0 + 300), End=iso(T0 + 900)),
    ]
    acct = read_sacct(write(tmp_path, rows))
    assert [(j.start_s, j.end_s) for j in acct.jobs] == [(T0 + 300, T0 + 900)]
    assert acct.set_aside == {"requeued (earlier runs)": 1}


def test_no_usable_job_raises_naming_the_file_and_counts(tmp_path: Path) -> None:
    rows = [row(State="RUNNING", End="Unknown"), row(JobID="2", State="BOGUS")]
    path = write(tmp_path, rows)
    with pytest.raises(TraceFormatError) as err:
        read_sacct(path)
    text = str(err.value)
    assert str(path) in text and "no usable job in 2 record(s)" in text
    assert "malformed 1" in text and "still running 1" in text
    assert "field 'State' = 'BOGUS'" in text
    assert "AccountingStorageTRES" not in text


def test_no_job_with_a_gpu_points_at_the_sites_gpu_accounting(tmp_path: Path) -> None:
    rows = [row(AllocTRES="cpu=1,mem=1G", ReqTRES="cpu=1,mem=1G")]
    with pytest.raises(TraceFormatError) as err:
        read_sacct(write(tmp_path, rows))
    assert "no GPU 1" in str(err.value)
    assert "AccountingStorageTRES names gres/gpu" in str(err.value)


def test_an_empty_file_and_a_missing_column_raise(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(TraceFormatError, match="no sacct header"):
        read_sacct(empty)
    columns = tuple(c for c in SACCT_COLUMNS if c not in ("Eligible", "QOS"))
    missing = r":1: not sacct -P output: missing column\(s\) QOS, Eligible"
    with pytest.raises(TraceFormatError, match=missing):
        read_sacct(write(tmp_path, [row()], columns))


# ----------------------------------------------------------------------------------- warnings


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("Start", "2024-13-01T00:00:00", "not a time"),
        ("Submit", "yesterday", "not a time"),
        ("Submit", "Unknown", "missing value"),
        ("End", iso(T0 + 50), "before Start"),
        ("State", "SLEEPING", "not a Slurm job state"),
        ("AllocTRES", "cpu=4,gres/gpu=two", "GPU count 'two'"),
        ("ReqTRES", "cpu4", "item 'cpu4' is not name=value"),
        ("Timelimit", "1:2:3:4", "not a time limit"),
        ("ExitCode", "x:0", "not an exit code"),
        ("NodeList", "gpu[01-", "not a host list"),
        ("NodeList", "gpu[a-b]", "not a host list"),
        ("JobID", "", "missing value"),
    ],
)
def test_each_malformed_record_is_one_warning(
    tmp_path: Path, field: str, value: str, message: str
) -> None:
    path = write(tmp_path, [row(JobID="1"), row(**{"JobID": "2", field: value})])
    acct = read_sacct(path)
    assert [j.job_id for j in acct.jobs] == ["1"]
    assert acct.set_aside == {"malformed": 1}
    assert len(acct.warnings) == 1
    warning = acct.warnings[0]
    assert warning.startswith(f"{path}:3: field '{field}' = {value!r}: ")
    assert message in warning


def test_a_line_with_a_missing_column_is_one_warning(tmp_path: Path) -> None:
    path = write(tmp_path, [row(JobID="1")])
    with path.open("a") as fh:
        fh.write("2|2|alice\n")
    acct = read_sacct(path)
    assert acct.set_aside == {"malformed": 1}
    assert acct.warnings == [
        f"{path}:3: field 'line' = '2|2|alice': has 3 field(s), the header has 17 "
        "(missing column?)"
    ]


def test_a_comment_holding_bars_is_put_back_together(tmp_path: Path) -> None:
    acct = read_sacct(write(tmp_path, [row(Comment="a|b|c")]))
    assert acct.warnings == [] and acct.jobs[0].hints == {}


# -------------------------------------------------------------------------------------- hints


def test_unreadable_hints_warn_and_keep_the_job(tmp_path: Path) -> None:
    path = write(tmp_path, [row(Comment='{"batch_size": -3}')])
    acct = read_sacct(path)
    assert [j.hints for j in acct.jobs] == [{}]
    assert acct.set_aside == {}
    assert acct.warnings == [
        f"{path}:2: hint 'batch_size' = -3: must be >= 1 (job kept without hints)"
    ]


def test_a_free_text_comment_is_not_a_hint(tmp_path: Path) -> None:
    acct = read_sacct(write(tmp_path, [row(Comment="baseline, see ticket 12")]))
    assert acct.warnings == [] and acct.jobs[0].hints == {}


# ------------------------------------------------------------------------------- GPUs, limits


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("billing=4,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=16G,node=1", (2, "a100")),
        ("cpu=4,gres/gpu=2,gres/gpu:a100=2", (2, "a100")),
        ("cpu=4,gres/gpu:a100=2", (2, "a100")),
        ("cpu=4,gres/gpu:a100=1,gres/gpu:v100=2", (3, None)),
        ("cpu=4,gres/gpu:a100=1,gres/gpu:v100=2,gres/gpu=3", (3, None)),
        ("cpu=4,gres/gpu=4", (4, None)),
        ("cpu=4,gres/gpumem=40G,gres/gpuutil=10", (None, None)),
        ("cpu=4,gres/shard=2", (None, None)),
        ("", (None, None)),
    ],
)
def test_gpu_tres_typed_and_untyped(tres: str, gpus: tuple[int | None, str | None]) -> None:
    assert parse_tres(tres, "AllocTRES") == gpus


def test_gpus_come_from_the_allocation_else_the_request(tmp_path: Path) -> None:
    rows = [
        row(JobID="1", AllocTRES="cpu=1,gres/gpu=4", ReqTRES="cpu=1,gres/gpu:a100=2"),
        row(JobID="2", AllocTRES="cpu=1", ReqTRES="cpu=1,gres/gpu:v100=1"),
        # the type it got is not a type it asked for
        row(JobID="3", AllocTRES="cpu=1,gres/gpu:a100=2,gres/gpu=2", ReqTRES="cpu=1,gres/gpu=2"),
    ]
    jobs = read_sacct(write(tmp_path, rows)).jobs
    assert [(j.num_gpus, j.gpu_type) for j in jobs] == [(4, "a100"), (1, "v100"), (2, None)]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-02:03:04", 93784.0),
        ("02:03:04", 7384.0),
        ("30:00", 1800.0),
        ("45", 2700.0),
        ("2-12", 216000.0),
        ("2-12:30", 217800.0),
        ("UNLIMITED", None),
        ("Partition_Limit", None),
        ("", None),
        ("00:00:00", None),
    ],
)
def test_time_limit_forms(text: str, seconds: float | None) -> None:
    assert parse_time_limit(text) == seconds


def test_a_bad_time_limit_is_malformed() -> None:
    with pytest.raises(Malformed):
        parse_time_limit("soon")


def test_host_lists_expand(tmp_path: Path) -> None:
    rows = [row(NodeList="gpu[01-03,10],login1,a[1-2]b[7-8]")]
    nodes = read_sacct(write(tmp_path, rows)).jobs[0].nodes
    assert nodes == (
        "gpu01", "gpu02", "gpu03", "gpu10", "login1", "a1b7", "a1b8", "a2b7", "a2b8"
    )
    rows = [row(NodeList="None assigned")]
    assert read_sacct(write(tmp_path, rows)).jobs[0].nodes == ()


def test_times_are_read_in_the_local_time_zone(tmp_path: Path) -> None:
    path = write(tmp_path, [row(Submit="2024-05-01T10:00:00", Eligible="2024-05-01T10:00:00")])
    assert read_sacct(path).jobs[0].submit_s == T0
    mp = pytest.MonkeyPatch()
    mp.setenv("TZ", "America/New_York")  # UTC-4 in May
    time.tzset()
    try:
        assert read_sacct(path).jobs[0].submit_s == T0 + 4 * 3600
    finally:
        mp.undo()
        time.tzset()


# ------------------------------------------------------------------------------------ to_spec


def test_to_spec_maps_every_field(tmp_path: Path) -> None:
    comment = (
        '{"model":"bert","batch_size":32,"iterations":1000,"stage_times_ms":[1,2],'
        '"plans":["dp"],"tickets":2,"guaranteed":true,"duration_s":900}'
    )
    rows = [
        row(JobID="1", Submit=iso(T0 - 50), Eligible=iso(T0 - 50)),
        row(JobID="2", Comment=comment, NodeList="gpu[01-02]", ExitCode="3:0",
            AllocTRES="cpu=1,gres/gpu:a100=2", ReqTRES="cpu=1,gres/gpu:a100=2",
            Timelimit="UNLIMITED"),
    ]
    acct = read_sacct(write(tmp_path, rows))
    assert acct.origin_s == T0 - 50
    specs = acct.specs()
    spec = specs[1]
    assert spec.job_id == "2" and spec.submit_time_s == 50.0
    assert spec.duration_s == 1000.0 and spec.num_gpus == 2 and spec.gpu_type == "a100"
    assert spec.user == "vision" and spec.time_limit_s is None
    assert (spec.model, spec.batch_size, spec.iterations) == ("bert", 32, 1000)
    assert spec.stage_times_ms == (1.0, 2.0)
    assert spec.attrs == {
        "user": "alice",
        "account": "vision",
        "partition": "gpu",
        "qos": "normal",
        "state": "COMPLETED",
        "exit_code": 3,
        "observed_start_s": 150.0,
        "observed_end_s": 1150.0,
        "eligible_s": 60.0,
        "nodes": ["gpu01", "gpu02"],
        "plans": ("dp",),
        "tickets": 2.0,
        "guaranteed": True,
        "hint_duration_s": 900.0,
    }


def test_to_spec_runs_at_least_a_second_and_falls_back_to_the_user(tmp_path: Path) -> None:
    rows = [row(Account="", Start=iso(T0 + 100), End=iso(T0 + 100), Timelimit="10")]
    spec = read_sacct(write(tmp_path, rows)).specs()[0]
    assert spec.duration_s == 1.0 and spec.user == "alice" and spec.time_limit_s == 600.0


# --------------------------------------------------------------------------------- sacct_argv


def test_sacct_argv() -> None:
    fmt = "--format=" + ",".join(SACCT_COLUMNS)
    assert sacct_argv("30d") == [
        "sacct", "-X", "-a", "-P", fmt, "--starttime", "now-30days", "--endtime", "now"
    ]
    assert sacct_argv("12h", partition="gpu", json=True) == [
        "sacct", "-X", "-a", "--json", "--starttime", "now-12hours", "--endtime", "now",
        "-r", "gpu",
    ]
    assert sacct_argv("2026-01-01")[6] == "2026-01-01"
    assert sacct_argv("2w")[6] == "now-2weeks"
    for bad in ("", "0d", "yesterday", "30 days", "2026-01-01; rm -rf /"):
        with pytest.raises(InputError):
            sacct_argv(bad)


# ---------------------------------------------------------------------------- property test

_STATES = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY")
_text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=0, max_size=8)


@st.composite
def _jobs(draw: st.DrawFn) -> list[AccountedJob]:
    n = draw(st.integers(1, 8))
    jobs = []
    for i in range(n):
        submit = draw(st.integers(T0, T0 + 10**7))
        eligible = submit + draw(st.integers(0, 1000))
        start = eligible + draw(st.integers(0, 10**5))
        end = start + draw(st.integers(0, 10**6))
        typed = draw(st.sampled_from([None, "a100", "h100"]))
        nodes = tuple(f"n{k:02d}" for k in range(draw(st.integers(0, 3))))
        hints: dict[str, object] = draw(
            st.sampled_from([{}, {"model": "resnet50"}, {"batch_size": 8, "iterations": 5}])
        )
        jobs.append(
            AccountedJob(
                job_id=draw(st.sampled_from([f"{i + 1}", f"900_{i}"])),
                user=draw(_text),
                account=draw(_text),
                partition=draw(_text),
                qos=draw(_text),
                state=draw(st.sampled_from(_STATES)),
                exit_code=draw(st.integers(0, 255)),
                submit_s=float(submit),
                eligible_s=float(eligible),
                start_s=float(start),
                end_s=float(end) if end > start else float(start + 1),
                time_limit_s=draw(st.sampled_from([None, 60.0, 3600.0, 93784.0])),
                num_gpus=draw(st.integers(1, 16)),
                gpu_type=typed,
                nodes=nodes,
                hints=hints,
                line=i + 2,
            )
        )
    return jobs


def _limit(seconds: float | None) -> str:
    if seconds is None:
        return "UNLIMITED"
    s = int(seconds)
    return f"{s // 86400}-{s % 86400 // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _cells(job: AccountedJob) -> dict[str, str]:
    gres = f"gres/gpu={job.num_gpus}"
    if job.gpu_type is not None:
        gres = f"gres/gpu:{job.gpu_type}={job.num_gpus},{gres}"
    comment = ""
    if job.hints:
        comment = "{" + ",".join(f'"{k}":{v!r}'.replace("'", '"') for k, v in job.hints.items())
        comment += "}"
    nodes = ",".join(job.nodes) if job.nodes else "None assigned"
    return row(
        JobID=job.job_id,
        JobIDRaw=job.job_id,
        User=job.user,
        Account=job.account,
        Partition=job.partition,
        QOS=job.qos,
        State=job.state,
        ExitCode=f"{job.exit_code}:0",
        Submit=iso(job.submit_s),
        Eligible=iso(job.eligible_s),
        Start=iso(job.start_s),
        End=iso(job.end_s),
        Timelimit=_limit(job.time_limit_s),
        AllocTRES=f"billing=1,cpu=2,{gres},mem=4G,node=1",
        ReqTRES=f"cpu=2,{gres},mem=4G",
        NodeList=nodes,
        Comment=comment,
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(jobs=_jobs(), seed=st.integers(0, 2**16))
def test_written_records_read_back_as_the_same_jobs(
    tmp_path: Path, jobs: list[AccountedJob], seed: int
) -> None:
    unique = list({j.job_id: j for j in reversed(jobs)}.values())[::-1]  # first of each id
    columns = list(SACCT_COLUMNS)
    random.Random(seed).shuffle(columns)
    path = write(tmp_path, [_cells(j) for j in unique], tuple(columns))
    acct = read_sacct(path)
    assert acct.warnings == [] and acct.set_aside == {}
    assert acct.jobs == sorted(unique, key=lambda j: (j.submit_s, j.job_id))
