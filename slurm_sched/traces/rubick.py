"""Rubick workloads (AlibabaPAI/reconfigurable-dl-scheduler): ``workloads/workload-base.csv``
(406 jobs) and ``workloads/naive.csv`` (a 10-job smoke test).

Header: ``name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,steps,
is_sla``; times in seconds.

==================  =========================================================================
``name``            ``job_id``
``submission_time`` ``submit_time_s``
``duration``        ``duration_s`` (run time with the given plan and GPUs)
``application``     ``model`` (bert, gpt2, llama7, llama30, roberta, t5, vit)
``num_gpus``        ``num_gpus``
``steps``           ``iterations``
``num_cpus``        ``num_cpus`` (optional column)
``bandwidth``       ``attrs["bandwidth"]`` (float; optional column)
``exec_plan``       ``attrs["exec_plan"]`` (str: ``ga``, ``zero-dp``, ``zero-offload`` or a
                    3-digit PP-TP-DP code, kept as text; optional column)
``is_sla``          ``attrs["is_sla"]`` (bool from 0/1; optional column)
==================  =========================================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slurm_sched.model.job import JobSpec
from slurm_sched.traces._common import CsvTable, JobCollector

NAME = "rubick"
REQUIRED = ("name", "submission_time", "duration", "application", "num_gpus", "steps")
SIGNATURE = frozenset(REQUIRED)


def read(path: str | Path) -> list[JobSpec]:
    """Read a Rubick workload file."""
    table = CsvTable(Path(path), REQUIRED, fmt=NAME)
    out = JobCollector(table.source)
    for row in table.rows():
        attrs: dict[str, Any] = {}
        bandwidth = row.opt_number("bandwidth", minimum=0.0)
        if bandwidth is not None:
            attrs["bandwidth"] = bandwidth
        exec_plan = row.opt_text("exec_plan")
        if exec_plan is not None:
            attrs["exec_plan"] = exec_plan
        if row.has("is_sla") and row.raw("is_sla").strip():
            attrs["is_sla"] = row.flag("is_sla")
        out.add(
            row.line,
            "name",
            {
                "job_id": row.text("name"),
                "submit_time_s": row.number("submission_time", minimum=0.0),
                "duration_s": row.number("duration", positive=True),
                "model": row.text("application"),
                "num_gpus": row.integer("num_gpus", minimum=1),
                "num_cpus": row.opt_integer("num_cpus", minimum=1),
                "iterations": row.integer("steps", minimum=1),
                "attrs": attrs,
            },
        )
    return out.finish()
