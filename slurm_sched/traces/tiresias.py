"""Tiresias traces (SymbioticLab/Tiresias, NSDI'19), e.g. the bundled ``60_job.csv``.

Header: ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``; times in
**seconds**. Mapping: ``job_id`` -> ``job_id``, ``num_gpu`` -> ``num_gpus``, ``submit_time`` ->
``submit_time_s``, ``duration`` -> ``duration_s``, ``iterations`` -> ``iterations``,
``model_name`` -> ``model``. ``interval`` (gap to the previous arrival) is optional and ignored.
"""

from __future__ import annotations

from pathlib import Path

from slurm_sched.model.job import JobSpec
from slurm_sched.traces._common import CsvTable, JobCollector

NAME = "tiresias"
REQUIRED = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")
SIGNATURE = frozenset(REQUIRED)


def read(path: str | Path) -> list[JobSpec]:
    """Read a Tiresias trace (seconds)."""
    table = CsvTable(Path(path), REQUIRED, fmt=NAME)
    out = JobCollector(table.source)
    for row in table.rows():
        out.add(
            row.line,
            "job_id",
            {
                "job_id": row.text("job_id"),
                "num_gpus": row.integer("num_gpu", minimum=1),
                "submit_time_s": row.number("submit_time", minimum=0.0),
                "iterations": row.integer("iterations", minimum=1),
                "model": row.text("model_name"),
                "duration_s": row.number("duration", positive=True),
            },
        )
    return out.finish()
