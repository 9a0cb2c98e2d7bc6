"""Trace readers: bundled files, unit conversions, canonical round trip, error reporting."""

from __future__ import annotations

import csv
import json
import math
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_sched.errors import InputError, TraceFormatError
from slurm_sched.model.job import JobSpec
from slurm_sched.traces import (
    TRACE_FORMATS,
    bundled,
    detect_format,
    read_trace,
    write_canonical,
)
from slurm_sched.traces.pollux_workload import isolated_run, packed_placement

MURI_HEADER = (
    "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,"
    "iteration_time,resource_time_0,resource_time_1,resource_time_2,priority"
)
MURI_ROW = "{id},{gpu},{submit},100,resnet18,128,{dur},0,921,723,113,73,0"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _muri(tmp_path: Path, rows: list[str], header: str = MURI_HEADER) -> Path:
    return _write(tmp_path, "trace.csv", "\n".join([header, *rows]) + "\n")


def _ok_rows(n: int) -> list[str]:
    return [MURI_ROW.format(id=i, gpu=1, submit=i * 1000, dur=5000) for i in range(n)]


@pytest.fixture(scope="module")
def philly_jobs() -> list[JobSpec]:
    return read_trace(bundled("pollux/philly.csv"))


# ----------------------------------------------------------------------------- bundled files

BUNDLED_COUNTS = {
    "muri/trace1.csv": ("muri", 1494),
    "muri/trace1_pr.csv": ("muri", 1494),
    "muri/trace3.csv": ("muri", 992),
    "muri/trace4.csv": ("muri", 2638),
    "muri/cluster_trace.csv": ("muri", 400),
    "muri/job_type_1.csv": ("muri", 992),
    "muri/job_type_2.csv": ("muri", 992),
    "muri/job_type_3.csv": ("muri", 992),
    "muri/job_type_4.csv": ("muri", 992),
    "tiresias/60_job.csv": ("tiresias", 60),
    "rubick/workloads/workload-base.csv": ("rubick", 406),
    "rubick/workloads/naive.csv": ("rubick", 10),
    **{
        f"pollux/workloads-{load}/workload-{i}.csv": ("pollux", n)
        for load, n in (("0.5", 80), ("1.0", 160), ("1.5", 240), ("2.0", 320), ("realistic", 160))
        for i in (1, 8)
    },
}


@pytest.mark.parametrize("name", sorted(BUNDLED_COUNTS))
def test_bundled_file_loads_with_expected_count(name: str) -> None:
    fmt, count = BUNDLED_COUNTS[name]
    path = bundled(name)
    assert detect_format(path) == fmt
    jobs = read_trace(path)
    assert len(jobs) == count
    assert jobs == read_trace(path, fmt=fmt)
    assert len({j.job_id for j in jobs}) == count
    submits = [j.submit_time_s for j in jobs]
    assert submits == sorted(submits)
    assert all(j.duration_s > 0 and j.num_gpus >= 1 for j in jobs)


def test_all_pollux_workloads_have_240_jobs_at_load_1_5() -> None:
    for i in range(1, 9):
        assert len(read_trace(bundled(f"pollux/workloads-1.5/workload-{i}.csv"))) == 240


def test_muri_converts_milliseconds_to_seconds() -> None:
    jobs = {j.job_id: j for j in read_trace(bundled("muri/trace1.csv"))}
    # line 3: 1,8,201694000,8787693,dqn,128,4472936000,201694000,509,435,8,0.5,0
    job = jobs["1"]
    assert job.submit_time_s == 201694.0
    # the duration column (4,472,936 s) is iterations x iteration time rounded up: the product
    assert job.duration_s == pytest.approx(8787693 * 0.509)
    assert job.duration_s != 4472936.0
    assert job.num_gpus == 8
    assert job.iterations == 8787693
    assert job.model == "dqn"
    assert job.batch_size == 128
    assert job.stage_times_ms == (435.0, 8.0, 0.5)
    assert job.attrs == {"iteration_time_ms": 509.0, "priority": 0}


def test_muri_duration_far_from_its_iterations_stays_as_written() -> None:
    # cluster_trace.csv line 2: 0,8,0,10956,gpt2,4,5095000,91000,437,...: 10,956 x 437 ms is
    # 4,787.8 s, not the 5,095 s measured on the testbed
    job = read_trace(bundled("muri/cluster_trace.csv"))[0]
    assert (job.job_id, job.duration_s) == ("0", 5095.0)


def test_ties_keep_file_order() -> None:
    jobs = read_trace(bundled("muri/trace1_pr.csv"))
    assert all(j.submit_time_s == 0 for j in jobs)
    assert [j.job_id for j in jobs] == [str(i) for i in range(1494)]


def test_tiresias_is_in_seconds() -> None:
    job = read_trace(bundled("tiresias/60_job.csv"))[0]  # 0,1,0,606,vgg19,164,30
    assert (job.job_id, job.num_gpus, job.submit_time_s, job.duration_s) == ("0", 1, 0.0, 164.0)
    assert (job.iterations, job.model) == (606, "vgg19")


def test_philly_submit_times_are_relative(philly_jobs: list[JobSpec]) -> None:
    assert len(philly_jobs) == 82247  # the bundled file has no invalid row: nothing skipped
    assert philly_jobs[0].submit_time_s == 0.0
    assert all(j.submit_time_s >= 0 for j in philly_jobs)
    span = datetime(2017, 12, 22, 8, 2, 11) - datetime(2017, 9, 4, 10, 30, 41)
    assert philly_jobs[-1].submit_time_s == span.total_seconds()
    by_id = {j.job_id: j for j in philly_jobs}
    first_row = by_id["philly-0"]  # 2017-10-09 07:01:55,66.0,1,66.0,11cb48
    start = datetime(2017, 9, 4, 10, 30, 41)
    assert first_row.submit_time_s == (datetime(2017, 10, 9, 7, 1, 55) - start).total_seconds()
    assert (first_row.duration_s, first_row.num_gpus, first_row.user) == (66.0, 1, "11cb48")
    assert len({j.user for j in philly_jobs}) == 15


def test_pollux_placement_strings() -> None:
    assert packed_placement(1) == "1"
    assert packed_placement(4) == "4"
    assert packed_placement(5) == "14"
    assert packed_placement(6) == "24"  # "42" normalised to its smallest rotation, as Pollux
    assert packed_placement(8) == "44"
    assert packed_placement(16) == "4444"


def test_pollux_durations_positive_and_plausible() -> None:
    for load in ("0.5", "1.0", "1.5", "2.0", "realistic"):
        for job in read_trace(bundled(f"pollux/workloads-{load}/workload-1.csv")):
            assert 10.0 < job.duration_s < 3 * 86400.0, job
            assert job.model == job.attrs["application"]
            assert job.iterations is not None and job.iterations >= 1
            assert job.batch_size is not None
            assert job.attrs["local_bsz"] == math.ceil(job.batch_size / job.num_gpus)


def test_pollux_iterations_come_from_the_last_validation_row() -> None:
    jobs = read_trace(bundled("pollux/workloads-realistic/workload-1.csv"))
    job = next(j for j in jobs if j.model == "cifar10" and j.batch_size == 128)
    path = bundled("pollux/models/cifar10/validation-128.csv")
    with path.open(newline="") as fh:
        last = list(csv.DictReader(fh))[-1]
    assert job.iterations == int(last["iteration"])
    # 1 GPU, local batch 128: placement "1", step time interpolated between measured 91 and 129
    assert job.attrs["placement"] == "1" and job.attrs["accum_steps"] == 0
    with bundled("pollux/models/cifar10/placements.csv").open(newline="") as fh:
        step = {
            int(r["local_bsz"]): float(r["step_time"])
            for r in csv.DictReader(fh)
            if r["placement"] == "1"
        }
    expected = step[91] + (128 - 91) / (129 - 91) * (step[129] - step[91])
    assert job.duration_s == pytest.approx(job.iterations * expected, rel=1e-12)


def test_pollux_derivation_details() -> None:
    run = isolated_run("bert", 6, 384)  # local 64 > 12 profiled: accumulate 6 x 11
    assert (run.placement, run.local_bsz, run.accum_steps, run.atomic_bsz) == ("24", 64, 5, 11)
    assert run.iteration_time_s == pytest.approx(
        run.step_time_s + 5 * (run.step_time_s - run.sync_time_s)
    )
    big = isolated_run("imagenet", 48, 6400)  # not in placements.csv: scalability rows
    assert big.placement == "444444444444" and big.iteration_time_s > 0
    scaled = isolated_run("cifar10", 4, 3000)  # no validation-3000: nearest is 4096
    assert scaled.validation_batch_size == 4096
    assert scaled.iterations == round(isolated_run("cifar10", 4, 4096).iterations * 4096 / 3000)


def test_pollux_unknown_application(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "w.csv", "name,time,application,num_replicas,batch_size\na-0,0,resnet999,1,32\n"
    )
    with pytest.raises(TraceFormatError) as exc:
        read_trace(path)
    assert exc.value.line == 2 and exc.value.field == "application"
    assert "cifar10" in str(exc.value)


def test_rubick_mapping() -> None:
    job = read_trace(bundled("rubick/workloads/naive.csv"))[1]
    # llama30-1,1639,142.2190972,llama30,48,384,1.25,344,64,0
    assert job.job_id == "llama30-1" and job.model == "llama30" and job.num_gpus == 48
    assert (job.submit_time_s, job.duration_s, job.iterations, job.num_cpus) == (
        1639.0,
        142.2190972,
        64,
        384,
    )
    assert job.attrs == {"bandwidth": 1.25, "exec_plan": "344", "is_sla": False}


# ------------------------------------------------------------------------------ canonical


def test_canonical_csv_example(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "jobs.csv",
        "job_id,submit_time_s,num_gpus,duration_s,user,model,stage_times_ms,attrs\n"
        'b,10,2,60.5,alice,resnet50,1.5;2;0.25,"{""k"": 1}"\n'
        "a,0,1,30,,,,\n",
    )
    assert detect_format(path) == "canonical"
    a, b = read_trace(path)
    assert a == JobSpec(job_id="a", submit_time_s=0, num_gpus=1, duration_s=30)
    assert b.stage_times_ms == (1.5, 2.0, 0.25) and b.attrs == {"k": 1} and b.user == "alice"


def test_canonical_jsonl_example(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "jobs.jsonl",
        '{"job_id": "a", "submit_time_s": 0, "num_gpus": 1, "duration_s": 30}\n\n'
        '{"job_id": 7, "submit_time_s": 1.5, "num_gpus": 2, "duration_s": 5, '
        '"stage_times_ms": [1, 2.5], "model": null}\n',
    )
    a, b = read_trace(path)
    assert a.job_id == "a" and b.job_id == "7" and b.stage_times_ms == (1.0, 2.5)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
@pytest.mark.parametrize(
    "name",
    [
        "muri/trace3.csv",
        "tiresias/60_job.csv",
        "rubick/workloads/workload-base.csv",
        "pollux/workloads-realistic/workload-2.csv",
    ],
)
def test_bundled_traces_convert_exactly(tmp_path: Path, name: str, suffix: str) -> None:
    jobs = read_trace(bundled(name))
    out = write_canonical(jobs, tmp_path / f"out{suffix}")
    assert detect_format(out) == "canonical"
    assert read_trace(out) == jobs


def test_philly_converts_exactly(tmp_path: Path, philly_jobs: list[JobSpec]) -> None:
    jobs = philly_jobs[:2000]
    assert read_trace(write_canonical(jobs, tmp_path / "p.csv")) == jobs


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)


@st.composite
def _jobs(draw: st.DrawFn) -> list[JobSpec]:
    ids = draw(st.lists(_text, min_size=1, max_size=6, unique=True))
    jobs = []
    for job_id in ids:
        opt_int = st.none() | st.integers(1, 10**9)
        jobs.append(
            JobSpec(
                job_id=job_id,
                submit_time_s=draw(st.floats(0, 1e9, allow_nan=False)),
                num_gpus=draw(st.integers(1, 1024)),
                duration_s=draw(st.floats(1e-9, 1e9)),
                user=draw(_text),
                model=draw(st.none() | _text),
                batch_size=draw(opt_int),
                iterations=draw(opt_int),
                gpu_type=draw(st.none() | _text),
                num_cpus=draw(opt_int),
                stage_times_ms=draw(
                    st.none() | st.tuples(*[st.floats(0, 1e6)] * draw(st.integers(1, 4)))
                ),
                attrs=draw(st.dictionaries(_text, _scalar, max_size=3)),
            )
        )
    return jobs


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(jobs=_jobs(), suffix=st.sampled_from([".csv", ".jsonl"]))
def test_canonical_round_trip(tmp_path: Path, jobs: list[JobSpec], suffix: str) -> None:
    path = write_canonical(jobs, tmp_path / f"rt{suffix}")
    expected = sorted(jobs, key=lambda j: j.submit_time_s)
    assert read_trace(path) == expected


def test_csv_writer_refuses_what_it_cannot_represent(tmp_path: Path) -> None:
    job = JobSpec(job_id="a", submit_time_s=0, num_gpus=1, duration_s=1, model="")
    with pytest.raises(TraceFormatError, match="empty string"):
        write_canonical([job], tmp_path / "x.csv")
    assert read_trace(write_canonical([job], tmp_path / "x.jsonl")) == [job]


# --------------------------------------------------------------------------- error reporting


def _error(path: Path, fmt: str | None = None) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as exc:
        read_trace(path, fmt)
    return exc.value


def test_bad_integer_names_file_line_field_value(tmp_path: Path) -> None:
    rows = _ok_rows(3)
    rows[1] = MURI_ROW.format(id=1, gpu="x", submit=0, dur=5000)
    path = _muri(tmp_path, rows)
    err = _error(path)
    assert (err.line, err.field, err.value) == (3, "num_gpu", "x")
    assert str(err) == f"{path}:3: field 'num_gpu' = 'x': not an integer"


def test_missing_column_is_named(tmp_path: Path) -> None:
    header = MURI_HEADER.replace(",duration,", ",")
    path = _muri(tmp_path, ["0,1,0,100,resnet18,128,0,921,723,113,73,0"], header=header)
    err = _error(path, "muri")
    assert err.field == "duration" and err.line == 1 and "'duration'" in str(err)


def test_negative_duration(tmp_path: Path) -> None:
    rows = [*_ok_rows(2), MURI_ROW.format(id=9, gpu=1, submit=0, dur=-5)]
    err = _error(_muri(tmp_path, rows))
    assert (err.line, err.field, err.value) == (4, "duration", "-5")
    assert "must be > 0" in str(err)


def test_duplicate_job_id(tmp_path: Path) -> None:
    rows = [*_ok_rows(3), MURI_ROW.format(id=1, gpu=1, submit=0, dur=5)]
    err = _error(_muri(tmp_path, rows))
    assert (err.line, err.field, err.value) == (5, "job_id", "1")
    assert "first seen on line 3" in str(err)


@pytest.mark.parametrize("fmt", [None, *TRACE_FORMATS])
def test_empty_file(tmp_path: Path, fmt: str | None) -> None:
    path = _write(tmp_path, "empty.csv", "")
    err = _error(path, fmt)
    assert "empty" in str(err) and str(path) in str(err)


def test_header_only_and_blank_lines(tmp_path: Path) -> None:
    assert "no jobs" in str(_error(_muri(tmp_path, ["", "  "])))


def test_wrong_field_count(tmp_path: Path) -> None:
    err = _error(_muri(tmp_path, [*_ok_rows(1), "5,1,0"]))
    assert err.line == 3 and "3 fields" in str(err)


def test_unknown_format_lists_known(tmp_path: Path) -> None:
    path = _muri(tmp_path, _ok_rows(1))
    err = _error(path, "slurmdb")
    assert err.value == "slurmdb"
    assert all(name in str(err) for name in TRACE_FORMATS)


def test_undetectable_header(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "x.csv", "\n\na,b,c\n1,2,3\n"))
    assert err.line == 3 and "known formats" in str(err) and "philly" in str(err)


def test_detection_names_the_missing_column(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "c.csv", "job_id,submit_time_s,num_gpus\na,0,1\n"))
    assert err.field == "duration_s" and "canonical" in str(err)


def test_missing_file(tmp_path: Path) -> None:
    err = _error(tmp_path / "nope.csv", "muri")
    assert "cannot read" in str(err)


def test_bundled_unknown_name() -> None:
    with pytest.raises(InputError):
        bundled("muri/nope.csv")
    with pytest.raises(InputError):
        bundled("../traces/__init__.py")


@pytest.mark.parametrize(
    ("text", "line", "field", "message"),
    [
        (
            '{"job_id": "a", "submit_time_s": 0, "num_gpus": 1, "duration_s": 1}\n{"job_id": ',
            2,
            None,
            "not valid JSON",
        ),
        (
            '{"job_id": "a", "submit_time_s": 0, "num_gpus": 1, "duration_s": 1, "gpus": 2}\n',
            1,
            "gpus",
            "unknown key",
        ),
        ('{"job_id": "a", "submit_time_s": 0, "num_gpus": 1}\n', 1, "duration_s", "missing"),
        (
            '{"job_id": "a", "submit_time_s": 0, "num_gpus": 1.5, "duration_s": 1}\n',
            1,
            "num_gpus",
            "not an integer",
        ),
        (
            '{"job_id": "a", "submit_time_s": -1, "num_gpus": 1, "duration_s": 1}\n',
            1,
            "submit_time_s",
            ">= 0",
        ),
        ("[1, 2]\n", 1, None, "not a JSON object"),
    ],
)
def test_jsonl_errors(
    tmp_path: Path, text: str, line: int, field: str | None, message: str
) -> None:
    err = _error(_write(tmp_path, "t.jsonl", text))
    assert (err.line, err.field) == (line, field)
    assert message in str(err)


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ("a,0,1,abc", "duration_s", "not a number"),
        ("a,0,1,nan", "duration_s", "finite"),
        (",0,1,5", "job_id", "missing value"),
        ("a,0,0,5", "num_gpus", ">= 1"),
        ('a,0,1,5,"1;;2"', "stage_times_ms", "empty item"),
    ],
)
def test_canonical_csv_errors(tmp_path: Path, row: str, field: str, message: str) -> None:
    header = "job_id,submit_time_s,num_gpus,duration_s"
    if row.count(",") == 4:
        header += ",stage_times_ms"
    err = _error(_write(tmp_path, "c.csv", f"{header}\n{row}\n"))
    assert (err.line, err.field) == (2, field)
    assert message in str(err)


def test_canonical_csv_unknown_column(tmp_path: Path) -> None:
    err = _error(
        _write(tmp_path, "c.csv", "job_id,submit_time_s,num_gpus,duration_s,gpu\na,0,1,5,v100\n")
    )
    assert err.field == "gpu" and "unknown column" in str(err)


def test_philly_bad_timestamp(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "p.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1,66.0,c1\n"
        "yesterday,66.0,1,66.0,c1\n",
    )
    err = _error(path)
    assert (err.line, err.field, err.value) == (3, "timestamp", "yesterday")


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fmt=st.sampled_from(sorted(TRACE_FORMATS)),
    cells=st.lists(st.text(max_size=6), min_size=1, max_size=14),
)
def test_garbage_rows_only_raise_trace_format_error(
    tmp_path: Path, fmt: str, cells: list[str]
) -> None:
    headers = {
        "canonical": "job_id,submit_time_s,num_gpus,duration_s,stage_times_ms,attrs",
        "muri": MURI_HEADER,
        "tiresias": "job_id,num_gpu,submit_time,iterations,model_name,duration,interval",
        "philly": "timestamp,duration,num_gpus,gpu_time,cluster",
        "pollux": "name,time,application,num_replicas,batch_size",
        "rubick": "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,"
        "exec_plan,steps,is_sla",
    }
    path = tmp_path / "g.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        fh.write(headers[fmt] + "\n")
        csv.writer(fh).writerow(cells)
    try:
        jobs = read_trace(path, fmt)
    except TraceFormatError as exc:
        assert str(path) in str(exc)
    else:
        assert len(jobs) == 1


def test_jsonl_garbage_only_raises_trace_format_error(tmp_path: Path) -> None:
    for value in ([], "x", 1.5, True, None, {"a": 1}, [1.0, "x"], -3):
        for key in ("job_id", "submit_time_s", "num_gpus", "stage_times_ms", "attrs", "user"):
            obj = {"job_id": "a", "submit_time_s": 0, "num_gpus": 1, "duration_s": 1}
            obj[key] = value
            path = _write(tmp_path, "g.jsonl", json.dumps(obj) + "\n")
            try:
                read_trace(path)
            except TraceFormatError as exc:
                assert exc.line == 1
