"""Muri traces (Rivendile/Muri, SIGCOMM'22): ``trace1.csv``, ``trace3.csv``, ``trace4.csv``,
``trace1_pr.csv``, ``cluster_trace.csv`` and ``job_type_1..4.csv``.

Header::

    job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,
    iteration_time,resource_time_0,resource_time_1,resource_time_2,priority

**Every time in these files is in milliseconds.** Mapping to :class:`JobSpec`:

=====================  ===========================================================
``job_id``             ``job_id`` (kept as written)
``num_gpu``            ``num_gpus``
``submit_time``        ``submit_time_s`` = value / 1000
``duration``           ``duration_s`` = value / 1000 (isolated run time); where
                       ``iterations x iteration_time`` is within 1 s of it, that
                       product instead (see below)
``iterations``         ``iterations``
``model_name``         ``model``
``batch_size``         ``batch_size``
``resource_time_0..2`` ``stage_times_ms`` (kept in ms: IO/CPU, GPU, network stage)
``iteration_time``     ``attrs["iteration_time_ms"]`` (float, ms)
``priority``           ``attrs["priority"]`` (int)
``interval``           ignored (the gap to the previous arrival; redundant)
=====================  ===========================================================

In the simulation traces the ``duration`` column is ``iterations x iteration_time`` rounded up
to whole seconds (trace 3 job 39: 62,000 for 64 x 957 = 61,248), while the artifact's jobs run
their iterations; the product is the exact run time, and ``duration_s`` takes it wherever the two
are less than a second apart. ``cluster_trace.csv`` (testbed) mostly has durations far from the
product (0.19-1.30 of it); those stay as written.

The ``job_type_*.csv`` files have the same header: they are ``trace3.csv``'s arrivals, GPU
counts and durations with the model mix restricted to 2, 4, 6 and 8 model types
(``job_type_4.csv`` is byte-identical to ``trace3.csv``). ``*_pr.csv`` has every job at time 0.
"""

from __future__ import annotations

from pathlib import Path

from slurm_sched.model.job import JobSpec
from slurm_sched.traces._common import CsvTable, JobCollector

NAME = "muri"
REQUIRED = (
    "job_id",
    "num_gpu",
    "submit_time",
    "iterations",
    "model_name",
    "batch_size",
    "duration",
    "iteration_time",
    "resource_time_0",
    "resource_time_1",
    "resource_time_2",
    "priority",
)
#: Columns that identify the format when it is auto-detected.
SIGNATURE = frozenset(REQUIRED)

_MS = 1000.0
#: A duration this close to ``iterations x iteration_time`` is that product rounded (seconds).
ROUNDING_S = 1.0


def read(path: str | Path) -> list[JobSpec]:
    """Read a Muri trace; times are converted from milliseconds to seconds."""
    table = CsvTable(Path(path), REQUIRED, fmt=NAME)
    out = JobCollector(table.source)
    for row in table.rows():
        stages = tuple(row.number(f"resource_time_{i}", minimum=0.0) for i in range(3))
        duration_s = row.number("duration", positive=True) / _MS
        iterations = row.integer("iterations", minimum=1)
        iteration_ms = row.number("iteration_time", minimum=0.0)
        try:
            exact_s = iterations * iteration_ms / _MS
        except OverflowError:  # an iteration count beyond floats: no product to compare
            exact_s = 0.0
        if exact_s > 0 and abs(duration_s - exact_s) < ROUNDING_S:
            duration_s = exact_s
        out.add(
            row.line,
            "job_id",
            {
                "job_id": row.text("job_id"),
                "num_gpus": row.integer("num_gpu", minimum=1),
                "submit_time_s": row.number("submit_time", minimum=0.0) / _MS,
                "duration_s": duration_s,
                "iterations": iterations,
                "model": row.text("model_name"),
                "batch_size": row.integer("batch_size", minimum=1),
                "stage_times_ms": stages,
                "attrs": {
                    "iteration_time_ms": iteration_ms,
                    "priority": row.integer("priority"),
                },
            },
        )
    return out.finish()
