"""How long a grid will take: time a truncated run of each policy, extrapolate by job count.

Method (printed by ``slurm-sched sweep plan``): for each policy label, its first cell is run on
the first ``k`` jobs of its trace (``k`` = ``calibration_jobs``, fewer if the trace is shorter);
the seconds per job of that run, times each cell's job count, is the cell's estimate. The
estimate is linear in the job count, so it is low for policies whose decision time grows with
the queue (a loaded cluster keeps more jobs waiting than a truncated run does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slurm_sched.model import JobSpec, parse_cluster_spec
from slurm_sched.sim.sim_cli import resolve_world, run_policy
from slurm_sched.sweep import workload
from slurm_sched.sweep.cells import Cell

DEFAULT_CALIBRATION_JOBS = 20

METHOD = ("each policy's first cell run on its trace's first {k} jobs; its seconds per job "
          "times each cell's job count (linear: low for policies whose decisions slow down "
          "with a longer queue)")


@dataclass(frozen=True)
class Estimate:
    per_cell_s: dict[int, float]  # index in the cell list -> estimated seconds
    jobs: dict[int, int]  # index -> job count of the cell's trace
    seconds_per_job: dict[str, float]  # policy label -> measured rate
    calibration_s: float  # what the calibration runs took
    k: int

    @property
    def total_s(self) -> float:
        return sum(self.per_cell_s.values())

    def wall_s(self, workers: int) -> float:
        """A lower bound for ``workers`` processes: the total over the workers, or the longest
        cell when that is longer."""
        longest = max(self.per_cell_s.values(), default=0.0)
        return max(self.total_s / max(1, workers), longest)


def _jobs_cache() -> Callable[[dict[str, Any]], list[JobSpec]]:
    cache: dict[str, list[JobSpec]] = {}

    def get(trace: dict[str, Any]) -> list[JobSpec]:
        key = repr(sorted(trace.items()))
        if key not in cache:
            cache[key] = workload.load_jobs(trace)
        return cache[key]

    return get


def job_counts(cells: Sequence[Cell]) -> dict[int, int]:
    """Each cell's job count (a generated trace's load, or the file's jobs after ``limit``)."""
    get = _jobs_cache()
    return {i: c.load if c.load is not None else len(get(c.trace)) for i, c in enumerate(cells)}


def estimate(cells: Sequence[Cell], k: int = DEFAULT_CALIBRATION_JOBS) -> Estimate:
    get = _jobs_cache()
    counts = {i: c.load if c.load is not None else len(get(c.trace))
              for i, c in enumerate(cells)}
    rate: dict[str, float] = {}
    t_all = time.perf_counter()
    for cell in cells:
        if cell.policy in rate:
            continue
        jobs = get(cell.trace)[:k]
        world = resolve_world([cell.policy_name], None if cell.world == "auto" else cell.world)
        t0 = time.perf_counter()
        run_policy(jobs, parse_cluster_spec(cell.cluster), cell.policy_name, dict(cell.options),
                   restart_overhead_s=cell.restart_overhead_s, world=world)
        rate[cell.policy] = (time.perf_counter() - t0) / max(1, len(jobs))
    per_cell = {i: rate[c.policy] * counts[i] for i, c in enumerate(cells)}
    return Estimate(per_cell, counts, rate, time.perf_counter() - t_all, k)
