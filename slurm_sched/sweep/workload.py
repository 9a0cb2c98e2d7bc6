"""The jobs of a cell's trace: a file (a path or a bundled name) or a seeded generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slurm_sched.model import JobSpec
from slurm_sched.sim.sim_cli import load_trace
from slurm_sched.workloads import sjf_bsbf


@dataclass(frozen=True)
class Generator:
    """``build(jobs, seed, **params)``: a workload of ``jobs`` jobs; ``params`` the keywords a
    grid may set."""

    build: Callable[..., list[JobSpec]]
    params: tuple[str, ...]
    summary: str


#: Generators a grid's ``[[traces]]`` entry may name (``generator = "..."``).
GENERATORS: dict[str, Generator] = {
    "sjf-bsbf": Generator(
        lambda jobs, seed, **kw: sjf_bsbf.generate_jobs(jobs, seed, **kw),
        ("large_fraction",),
        "calibrated Pollux-recipe workload of the SJF-BSBF reproduction: N jobs from Philly's "
        "02:00-10:00 window (same 8 hours at every load; loads of one seed nest)"),
}


def load_jobs(trace: dict[str, Any]) -> list[JobSpec]:
    """The jobs of a cell's ``trace`` definition (see :class:`~slurm_sched.sweep.cells.Cell`).

    A file goes through the same reader as ``slurm-sched simulate --trace``."""
    if trace.get("generator") is not None:
        gen = GENERATORS[trace["generator"]]
        return gen.build(trace["jobs"], trace["seed"], **trace.get("params", {}))
    return load_trace(trace["file"], trace.get("format"), trace.get("limit"))
