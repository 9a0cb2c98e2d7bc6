"""The Microsoft Philly job summary as shipped by Pollux (petuum/adaptdl, ``simulator/traces/
philly.csv``): 82,247 jobs submitted 2017-09-04 .. 2017-12-22.

Header: ``timestamp,duration,num_gpus,gpu_time,cluster``.

=============  ==============================================================================
``timestamp``  submit date-time (``YYYY-MM-DD HH:MM:SS``, no time zone). The file is **not**
               sorted: ``submit_time_s`` = seconds since the earliest timestamp in the file,
               so the first job arrives at 0.
``duration``   ``duration_s`` (seconds, must be > 0)
``num_gpus``   ``num_gpus`` (>= 1)
``cluster``    ``user``: the Philly virtual cluster, i.e. the tenant for fairness experiments
``gpu_time``   ignored (it is ``duration x num_gpus`` on every row of the bundled file)
=============  ==============================================================================

There is no job id: ``job_id`` = ``philly-<row>``, ``<row>`` being the 0-based index of the data
row in file order (blank lines are not counted), so ids are stable for a given file. The trace
has no model names, batch sizes or iteration counts.

Invalid rows (``duration <= 0``, ``num_gpus <= 0``, unparsable values) raise
:class:`TraceFormatError`; the bundled file has none, so nothing is skipped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from slurm_sched.model.job import JobSpec
from slurm_sched.traces._common import CsvTable, JobCollector, Row

NAME = "philly"
REQUIRED = ("timestamp", "duration", "num_gpus", "cluster")
SIGNATURE = frozenset(REQUIRED)


def _timestamp(row: Row) -> datetime:
    raw = row.raw("timestamp")
    try:
        ts = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise row.fail("timestamp", raw, "not a date-time (expected YYYY-MM-DD HH:MM:SS)") from None
    if ts.tzinfo is not None:
        try:
            ts = ts.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:  # found by fuzzing: e.g. 0001-01-01T00:00:00+01:00
            raise row.fail("timestamp", raw, "date-time out of range in UTC") from None
    return ts


def read(path: str | Path) -> list[JobSpec]:
    """Read the Philly job summary; submit times are relative to the earliest job."""
    table = CsvTable(Path(path), REQUIRED, fmt=NAME)
    i_dur = table.index["duration"]
    i_gpu = table.index["num_gpus"]
    i_cluster = table.index["cluster"]
    parsed: list[tuple[int, datetime, float, int, str]] = []
    for row in table.rows():
        cells = row.cells
        ts = _timestamp(row)
        # Fast path: plain conversions; the typed accessors re-parse only to build the error.
        try:
            duration = float(cells[i_dur])
            if not 0.0 < duration < float("inf"):
                raise ValueError
        except ValueError:
            duration = row.number("duration", positive=True)
        try:
            gpus = int(cells[i_gpu])
            if gpus < 1:
                raise ValueError
        except ValueError:
            gpus = row.integer("num_gpus", minimum=1)
        cluster = cells[i_cluster].strip() or row.text("cluster")
        parsed.append((row.line, ts, duration, gpus, cluster))
    out = JobCollector(table.source)
    if parsed:
        t0 = min(p[1] for p in parsed)
        for n, (line, ts, duration, gpus, cluster) in enumerate(parsed):
            out.add(
                line,
                "timestamp",
                {
                    "job_id": f"philly-{n}",
                    "submit_time_s": (ts - t0).total_seconds(),
                    "num_gpus": gpus,
                    "duration_s": duration,
                    "user": cluster,
                },
            )
    return out.finish()
