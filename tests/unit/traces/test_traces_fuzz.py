"""Fuzzing the trace readers: every format, any file content gives jobs or a TraceFormatError
(an InputError naming the file), never a crash.

5,000 Hypothesis examples, each writing one structured file per format (six CSV layouts and
canonical JSONL): the format's header (shuffled, with optional and unknown
columns, a missing or duplicated column now and then) over rows whose cells mix plausible and
hostile values (empty, NaN, inf, 1e400, 400-digit numbers, unicode digits, NUL, quotes, embedded
newlines, deep JSON, odd dates), with broken quoting, wrong field counts, BOMs and blank lines
thrown in; plus one such file garbled at the byte level (invalid UTF-8, NULs, cut short) through
the format detection and every reader. Accepted jobs are checked (sorted by submit time, valid
ranges) and must survive write_canonical -> read_trace as JSONL.

The structured files are built from one drawn seed with ``random.Random``: Hypothesis costs
about 1-2 ms per example on a busy 2-core machine whatever the test does, so one draw and eight
files per example keep 40,000 files to seconds; a failure prints the seed, which reproduces it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_sched.errors import InputError, TraceFormatError
from slurm_sched.traces import (
    TRACE_FORMATS,
    canonical,
    muri,
    philly,
    pollux_workload,
    read_trace,
    rubick,
    tiresias,
    write_canonical,
)

FUZZ = settings(max_examples=5000, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(min_value=0, max_value=2**63)

#: format -> (reader name, required columns, optional columns)
LAYOUTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "canonical-csv": (canonical.NAME, canonical.REQUIRED, canonical.OPTIONAL),
    "muri": (muri.NAME, muri.REQUIRED, ("interval",)),
    "tiresias": (tiresias.NAME, tiresias.REQUIRED, ("interval",)),
    "philly": (philly.NAME, philly.REQUIRED, ("gpu_time",)),
    "pollux": (pollux_workload.NAME, pollux_workload.REQUIRED, ()),
    "rubick": (rubick.NAME, rubick.REQUIRED, ("num_cpus", "bandwidth", "exec_plan", "is_sla")),
}

HOSTILE = ["", " ", "nan", "NaN", "inf", "-inf", "1e400", "-1e400", "1e-400", "-0", "-1", "0",
           "0.0", "1.5", "abc", "9" * 400, "1" + "0" * 4400, "1_000", "\u0663", "\u00bd", "0x10",
           "1e308", "1e300", "2e9", " 7 ", "\x00", '"', "a,b", "a\nb", "\u00e9", "\U0001f600",
           "true", "{}", "[]", "4096", "4097", "1000000001", "2.5", "1e3", "3.0"]
INTS = ["1", "2", "4", "8", "16", "64", "1000000000", "3"]
FLOATS = ["1", "2.5", "30", "3600", "1e6", "12345.678", "1e9", "1e15"]
TEXTS = ["resnet50", "bert", "cifar10", "vgg16", "alice", "a100", "x" * 200, "-", "11cb48"]
DATES = ["2017-10-09 07:01:55", "2017-09-04 00:00:00", "2017-12-22T23:59:59",
         "2017-10-09 07:01:55+05:00", "2017-10-09", "20171009T070155"]
BAD_DATES = ["0001-01-01 00:00:00", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
             "9999-12-31 23:59:59", "2017-02-30 00:00:00", "2017-10-09 25:00:00", "yesterday"]
APPS = ["cifar10", "bert", "imagenet", "ncf", "yolov3", "deepspeech2"]
BAD_APPS = ["nope", "../models", "CIFAR10", "cifar10/../bert"]
STAGES = ["1;2;3", "1.5", "0;0;0", "0.25;4"]
BAD_STAGES = [";", "1;;2", "nan;1", "-1;2", "1e400"]
ATTRS = ['{"a": 1}', '{"p": [1, 2]}', "{}", '{"a": NaN}']
BAD_ATTRS = ["[1]", "{", "[" * 5000 + "]" * 5000, '{"a": ' * 3000 + "1" + "}" * 3000, "null",
             '"x"']
FLAGS = ["0", "1", "true", "false", "yes", "no"]

_INT_COLS = {"num_gpu", "num_gpus", "iterations", "batch_size", "steps", "num_replicas",
             "num_cpus", "priority"}
_TEXT_COLS = {"job_id", "name", "model_name", "user", "model", "gpu_type", "cluster",
              "exec_plan"}
#: column -> (plausible values, extra hostile values for that column)
_VOCAB: dict[str, tuple[list[str], list[str]]] = {
    "timestamp": (DATES, BAD_DATES),
    "application": (APPS, BAD_APPS),
    "is_sla": (FLAGS, ["2", "maybe"]),
    "stage_times_ms": (STAGES, BAD_STAGES),
    "attrs": (ATTRS, BAD_ATTRS),
}


def _plausible(rng: random.Random, col: str, row: int) -> str:
    if col in ("job_id", "name"):
        return rng.choice([str(row), f"j{row}", f"j{row}", f"j{rng.randint(0, 3)}"])
    if col in _INT_COLS:
        return rng.choice(INTS)
    if col in _TEXT_COLS:
        return rng.choice(TEXTS)
    if col in _VOCAB:
        return rng.choice(_VOCAB[col][0])
    return rng.choice(FLOATS)


def _hostile(rng: random.Random, col: str) -> str:
    r = rng.random()
    if col in _VOCAB and r < 0.5:
        return rng.choice(_VOCAB[col][1])
    if r < 0.9:
        return rng.choice(HOSTILE)
    return "".join(rng.choice("0123456789.,-e \"\n\r\t;x\u00e9") for _ in range(rng.randint(1, 12)))


def _csv_text(rng: random.Random, layout: str) -> str:
    _, required, optional = LAYOUTS[layout]
    cols = list(required) + [c for c in optional if rng.random() < 0.5]
    if rng.random() < 0.03:
        cols.remove(rng.choice(cols))
    if rng.random() < 0.03:
        cols.append(rng.choice(cols))
    if rng.random() < 0.03:
        cols.append(rng.choice(["extra", "", " job_id", '"q"']))
    rng.shuffle(cols)
    n_rows = 0 if rng.random() < 0.02 else rng.randint(1, 6)
    rows = [[_plausible(rng, c, i) for c in cols] for i in range(n_rows)]
    # a few hostile cells per file (none in a third of the files): readers get past row 1
    cells = [(i, k) for i in range(len(rows)) for k in range(len(cols))]
    for i, k in rng.sample(cells, min(len(cells), rng.choice([0, 0, 1, 1, 2, 4]))):
        rows[i][k] = _hostile(rng, cols[k])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator=rng.choice(["\n", "\r\n"]))
    w.writerow(cols)
    for cells_of_row in rows:
        if rng.random() < 0.03:
            cells_of_row.append("x")
        if rng.random() < 0.03 and cells_of_row:
            cells_of_row.pop()
        w.writerow(cells_of_row)
        if rng.random() < 0.1:
            buf.write(rng.choice(["\n", "  \n", ",,,\n"]))
    text = buf.getvalue()
    if rng.random() < 0.05:
        text = "\ufeff" + text
    if rng.random() < 0.03:  # broken quoting
        pos = rng.randint(0, len(text))
        text = text[:pos] + '"' + text[pos:]
    if rng.random() < 0.02:
        text = ""
    return text


_JSON_VALUES = [None, True, 0, 1, -1, 2.5, 1e308, 10**30, 10**400 // 10**370, float("nan"),
                float("inf"), "", "x", "1", [], [1, 2], [1, "a"], [1e308, -1], {}, {"k": [1]}]


def _plausible_json(rng: random.Random, col: str, row: int) -> object:
    if col == "stage_times_ms":
        return [rng.choice([0.5, 1, 2.25, 10]) for _ in range(rng.randint(1, 4))]
    if col == "attrs":
        return rng.choice([{}, {"a": 1}, {"p": [1, "x"]}, {"n": {"m": None}}])
    raw = _plausible(rng, col, row)
    if col in _TEXT_COLS or col in ("job_id", "name"):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _jsonl_text(rng: random.Random) -> str:
    lines = []
    for i in range(rng.randint(0, 6)):
        r = rng.random()
        if r < 0.03:
            lines.append(rng.choice(["[1]", "{", "null", "{" * 3000 + "}" * 3000,
                                     "[" * 100000 + "]" * 100000, "   ", '{"a":1}{', "\x00"]))
            continue
        obj = {}
        for col in canonical.COLUMNS:
            if (col in canonical.REQUIRED and rng.random() < 0.95) or rng.random() < 0.3:
                if rng.random() < 0.93:
                    obj[col] = _plausible_json(rng, col, i)
                else:
                    obj[col] = rng.choice(_JSON_VALUES)
        if rng.random() < 0.05:
            obj[rng.choice(["extra", "Job_id", ""])] = 1
        lines.append(json.dumps(obj, allow_nan=True, ensure_ascii=rng.random() < 0.5))
    return rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n"])


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    # Overwriting a file on some file systems costs milliseconds (ext4 flushes a truncated
    # file); each case writes a new file and removes it, in memory where /dev/shm exists.
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="fuzz-traces-", dir=base) as d:
        yield Path(d)


@contextlib.contextmanager
def written(path: Path, data: bytes) -> Iterator[Path]:
    path.write_bytes(data)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
        path.with_name("roundtrip.jsonl").unlink(missing_ok=True)


def _check_jobs(jobs, path: Path) -> None:
    assert jobs, "a reader returns at least one job or raises"
    times = [j.submit_time_s for j in jobs]
    assert times == sorted(times)
    assert len({j.job_id for j in jobs}) == len(jobs)
    for j in jobs:
        assert j.num_gpus >= 1 and j.duration_s > 0 and j.submit_time_s >= 0
        assert math.isfinite(j.duration_s) and math.isfinite(j.submit_time_s)
    out = path.with_name("roundtrip.jsonl")
    try:
        write_canonical(jobs, out)
    except TraceFormatError:
        return  # e.g. attrs with NaN: refused by the writer with a named error
    assert read_trace(out) == jobs


def _read(path: Path, fmt: str | None) -> None:
    try:
        jobs = read_trace(path, fmt)
    except TraceFormatError as exc:
        line = exc.one_line()
        assert line.startswith(str(path)), line
        return
    _check_jobs(jobs, path)


def _structured_case(workdir: Path, layout: str, rng: random.Random) -> None:
    if layout == "canonical-jsonl":
        with written(workdir / "trace.jsonl", _jsonl_text(rng).encode()) as path:
            _read(path, canonical.NAME)
        return
    with written(workdir / f"{layout}.csv", _csv_text(rng, layout).encode()) as path:
        _read(path, LAYOUTS[layout][0])
        if rng.random() < 0.2:
            _read(path, None)  # detection, then whatever reader it picks


_BYTES = [b"\xff", b"\xc3", b"\x00", b"\xef\xbb\xbf", b"\r", b"\n", b",", b'"', b"{", b"}",
          b"\xed\xa0\x80", b"\xf0\x9f\x98", b"9" * 50]


def _garbled(rng: random.Random) -> bytes:
    """A structured file of some format with random bytes inserted, replaced or cut."""
    layout = rng.choice([*LAYOUTS, "canonical-jsonl"])
    text = _jsonl_text(rng) if layout == "canonical-jsonl" else _csv_text(rng, layout)
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 8)):
        pos = rng.randint(0, len(data))
        chunk = rng.choice(_BYTES) if rng.random() < 0.6 else rng.randbytes(rng.randint(1, 4))
        if rng.random() < 0.5:
            data[pos:pos] = chunk
        else:
            data[pos:pos + len(chunk)] = chunk
    if rng.random() < 0.1:
        data = data[: rng.randint(0, len(data))]
    return bytes(data)


def _every_reader(path: Path) -> None:
    for fmt in [None, *TRACE_FORMATS]:
        try:
            jobs = read_trace(path, fmt)
        except InputError:
            continue
        _check_jobs(jobs, path)


@FUZZ
@given(seed=SEEDS, suffix=st.sampled_from([".csv", ".jsonl", ""]))
def test_files_of_every_format(workdir, seed, suffix):
    """Per example: one structured file per format through its reader (and now and then the
    detection), plus one garbled file through the detection and every reader."""
    rng = random.Random(seed)
    for layout in [*LAYOUTS, "canonical-jsonl"]:
        _structured_case(workdir, layout, rng)
    with written(workdir / f"garbled{suffix}", _garbled(rng)) as path:
        _every_reader(path)


def test_the_generators_reach_both_outcomes(workdir):
    """The fuzz files are not all rejected at the first row: a fair share of each format reads."""
    for layout in [*LAYOUTS, "canonical-jsonl"]:
        ok = bad = 0
        rng = random.Random(7)
        for _ in range(150):
            text = _jsonl_text(rng) if layout == "canonical-jsonl" else _csv_text(rng, layout)
            name = "t.jsonl" if layout == "canonical-jsonl" else "t.csv"
            fmt = canonical.NAME if layout == "canonical-jsonl" else LAYOUTS[layout][0]
            with written(workdir / name, text.encode()) as path:
                try:
                    read_trace(path, fmt)
                    ok += 1
                except TraceFormatError:
                    bad += 1
        assert ok > 15 and bad > 15, (layout, ok, bad)
