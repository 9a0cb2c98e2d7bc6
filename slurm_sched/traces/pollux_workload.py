"""Pollux workloads (petuum/adaptdl, osdi21-artifact, ``simulator/workloads-*/workload-N.csv``).

Header: ``name,time,application,num_replicas,batch_size``; ``time`` is the submit time in
seconds, ``num_replicas`` the number of GPUs and ``batch_size`` the global batch size.

Mapping: ``name`` -> ``job_id``, ``time`` -> ``submit_time_s``, ``num_replicas`` -> ``num_gpus``,
``application`` -> ``model``, ``batch_size`` -> ``batch_size``; ``iterations`` and
``duration_s`` are derived (below); ``attrs`` holds ``application``, ``local_bsz``,
``atomic_bsz``, ``accum_steps``, ``placement`` and ``validation_batch_size``.

Derived isolated duration
-------------------------
The workload rows carry no run time: Pollux simulates each job's progress from measured
per-application data (``pollux/models/<application>/``). To give non-elastic policies a fixed
run time we compute, once per job, the time to train to completion at the requested batch size
B on its requested R GPUs, alone. **This is an approximation**; it follows the fixed-batch-size
path of Pollux's own simulator (``simulator.py``: ``Job.update_local_bsz``/``Job.step`` and
``applications.py``: ``get_throughput``), simplified as noted:

1. *Iterations.* ``validation-<B>.csv`` has one row per epoch; the job is complete at its last
   row (Pollux's ``max_epochs`` equals the number of rows for all six applications), so
   ``iterations`` = the ``iteration`` of the last row. When there is no file for exactly B, the
   file with the nearest batch size B' (nearest in ratio, ``|log(B'/B)|``; ties go to the larger)
   is used and its count is scaled by B'/B so that the number of samples is the same:
   ``iterations = max(1, round(it(B') * B' / B))``. (Pollux interpolates linearly in B between
   the two neighbours; the bundled workloads only use batch sizes that have a file.)
2. *Placement.* R GPUs packed on 4-GPU nodes: digits ``4`` then the remainder (6 -> ``42``,
   8 -> ``44``, 1 -> ``1``), normalised like Pollux to the lexicographically smallest rotation
   (``42`` -> ``24``, which is how ``placements.csv`` names it).
3. *Per-GPU batch and gradient accumulation.* ``local_bsz = ceil(B / R)``. When it exceeds the
   largest profiled per-GPU batch size ``max_local`` (the largest ``local_bsz`` in
   ``placements.csv``; 8 for yolov3, as Pollux sets it), the job accumulates gradients:
   ``accum_steps = ceil(local_bsz / max_local) - 1`` and each micro-step runs
   ``atomic_bsz = ceil(local_bsz / (accum_steps + 1))`` samples per GPU.
4. *Iteration time.* ``step_time`` and ``sync_time`` (seconds) are interpolated linearly in
   ``local_bsz`` (clamped to the measured range) among the rows of ``placements.csv`` for that
   placement string. Placements with more than 4 nodes (R > 16) are not in ``placements.csv``:
   then the ``scalability.csv`` rows with the same ``num_replicas`` and the nearest
   ``num_nodes`` to ``ceil(R/4)`` are used, or, when no row has that ``num_replicas``, the group
   with the nearest ``num_replicas`` (Pollux interpolates in 3-D instead). ``step_time`` is the
   whole iteration *including* the gradient synchronisation ``sync_time`` (Pollux:
   ``accum_time = step_time - sync_time``), so
   ``iteration_time = step_time + accum_steps * (step_time - sync_time)``.
5. ``duration_s = iterations * iteration_time``.

Not reproduced: the statistical-efficiency bookkeeping of the elastic simulation (irrelevant at
a fixed batch size), Pollux's 30 s restart delay, its quirk that forces one accumulation step on
1-GPU jobs whose batch exceeds the smallest validated one, and the cap of ``atomic_bsz`` by the
largest validated batch.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from slurm_sched.errors import TraceFormatError
from slurm_sched.model.job import JobSpec
from slurm_sched.traces._common import CsvTable, JobCollector, Row

NAME = "pollux"
REQUIRED = ("name", "time", "application", "num_replicas", "batch_size")
SIGNATURE = frozenset(REQUIRED)

#: GPUs per node used to pack a job's replicas into a placement string.
GPUS_PER_NODE = 4
#: Largest job accepted (GPUs, global batch): far beyond the measured data (<= 64 GPUs).
MAX_REPLICAS = 4096
MAX_BATCH_SIZE = 10**9
#: Per-application overrides of the largest per-GPU batch (Pollux ``applications.py``).
MAX_LOCAL_BSZ_OVERRIDE = {"yolov3": 8}

_VALIDATION_RE = re.compile(r"^validation-(\d+)\.csv$")


def default_models_dir() -> Path:
    """The bundled Pollux per-application data (``slurm_sched/data/pollux/models``)."""
    return Path(__file__).resolve().parent.parent / "data" / "pollux" / "models"


@dataclass(frozen=True)
class _Curve:
    """step/sync time (s) as a function of the per-GPU batch size, sorted by batch size."""

    local_bsz: tuple[float, ...]
    step_time: tuple[float, ...]
    sync_time: tuple[float, ...]

    @staticmethod
    def build(points: list[tuple[float, float, float]]) -> _Curve:
        merged: dict[float, list[tuple[float, float]]] = {}
        for bsz, step, sync in points:
            merged.setdefault(bsz, []).append((step, sync))
        xs = sorted(merged)
        steps = [sum(s for s, _ in merged[x]) / len(merged[x]) for x in xs]
        syncs = [sum(y for _, y in merged[x]) / len(merged[x]) for x in xs]
        return _Curve(tuple(xs), tuple(steps), tuple(syncs))

    def at(self, bsz: float) -> tuple[float, float]:
        xs = self.local_bsz
        if bsz <= xs[0]:
            return self.step_time[0], self.sync_time[0]
        if bsz >= xs[-1]:
            return self.step_time[-1], self.sync_time[-1]
        hi = bisect.bisect_left(xs, bsz)
        lo = hi - 1
        w = (bsz - xs[lo]) / (xs[hi] - xs[lo])
        step = self.step_time[lo] + w * (self.step_time[hi] - self.step_time[lo])
        sync = self.sync_time[lo] + w * (self.sync_time[hi] - self.sync_time[lo])
        return step, sync


@dataclass(frozen=True)
class IsolatedRun:
    """The derivation of one job's isolated run time (all the intermediate values)."""

    iterations: int
    validation_batch_size: int
    placement: str
    local_bsz: int
    atomic_bsz: int
    accum_steps: int
    step_time_s: float
    sync_time_s: float
    iteration_time_s: float

    @property
    def duration_s(self) -> float:
        return self.iterations * self.iteration_time_s


def packed_placement(num_replicas: int, gpus_per_node: int = GPUS_PER_NODE) -> str:
    """Placement string of ``num_replicas`` GPUs packed on nodes of ``gpus_per_node`` GPUs,
    normalised to its lexicographically smallest rotation (Pollux's naming): 6 -> ``"24"``."""
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
    full, rest = divmod(num_replicas, gpus_per_node)
    digits = [gpus_per_node] * full + ([rest] if rest else [])
    rotations = [tuple(digits[i:] + digits[:i]) for i in range(len(digits))]
    return "".join(str(d) for d in min(rotations))


class PolluxApplication:
    """Measured data of one Pollux application: validation curves and step times."""

    def __init__(self, directory: Path) -> None:
        self.name = directory.name
        self.directory = directory
        self.final_iteration: dict[int, int] = {}
        for path in sorted(directory.glob("validation-*.csv")):
            match = _VALIDATION_RE.match(path.name)
            if match:
                self.final_iteration[int(match.group(1))] = _last_iteration(path)
        if not self.final_iteration:
            raise TraceFormatError(
                "no validation-<batch_size>.csv file", source=str(directory), field="application"
            )
        self.placements: dict[str, _Curve] = {}
        groups: dict[str, list[tuple[float, float, float]]] = {}
        table = CsvTable(directory / "placements.csv", _PLACEMENT_COLS, fmt="pollux placements")
        for row in table.rows():
            groups.setdefault(row.text("placement"), []).append(_point(row))
        self.placements = {k: _Curve.build(v) for k, v in groups.items()}
        self.scalability: dict[tuple[int, int], _Curve] = {}
        scal_path = directory / "scalability.csv"
        if scal_path.exists():
            sgroups: dict[tuple[int, int], list[tuple[float, float, float]]] = {}
            stable = CsvTable(scal_path, _SCALABILITY_COLS, fmt="pollux scalability")
            for row in stable.rows():
                key = (row.integer("num_nodes", minimum=1), row.integer("num_replicas", minimum=1))
                sgroups.setdefault(key, []).append(_point(row))
            self.scalability = {k: _Curve.build(v) for k, v in sgroups.items()}
        if not self.placements:
            raise TraceFormatError("no rows", source=str(directory / "placements.csv"))
        measured_max = max(max(c.local_bsz) for c in self.placements.values())
        self.max_local_bsz = int(MAX_LOCAL_BSZ_OVERRIDE.get(self.name, measured_max))

    def iterations(self, batch_size: int) -> tuple[int, int]:
        """(iterations to completion at ``batch_size``, batch size of the file used)."""
        if batch_size in self.final_iteration:
            return self.final_iteration[batch_size], batch_size
        log_b = math.log(batch_size)
        nearest = min(self.final_iteration, key=lambda b: (abs(math.log(b) - log_b), -b))
        scaled = round(self.final_iteration[nearest] * nearest / batch_size)
        return max(1, scaled), nearest

    def _curve(self, num_replicas: int) -> tuple[str, _Curve]:
        placement = packed_placement(num_replicas)
        curve = self.placements.get(placement)
        if curve is not None:
            return placement, curve
        nodes = math.ceil(num_replicas / GPUS_PER_NODE)
        groups: dict[tuple[int, int], _Curve] = dict(self.scalability)
        if not groups:  # no scalability data: fall back on placements grouped by shape
            for key, c in self.placements.items():
                groups.setdefault((len(key), sum(int(d) for d in key)), c)
        best = min(groups, key=lambda k: (abs(k[1] - num_replicas), abs(k[0] - nodes), k))
        return placement, groups[best]

    def isolated_run(self, num_replicas: int, batch_size: int) -> IsolatedRun:
        iterations, file_bsz = self.iterations(batch_size)
        placement, curve = self._curve(num_replicas)
        local_bsz = _ceil_div(batch_size, num_replicas)
        accum_steps = _ceil_div(local_bsz, self.max_local_bsz) - 1
        atomic_bsz = _ceil_div(local_bsz, accum_steps + 1)
        step, sync = curve.at(atomic_bsz)
        iteration_time = step + accum_steps * max(0.0, step - sync)
        return IsolatedRun(
            iterations=iterations,
            validation_batch_size=file_bsz,
            placement=placement,
            local_bsz=local_bsz,
            atomic_bsz=atomic_bsz,
            accum_steps=accum_steps,
            step_time_s=step,
            sync_time_s=sync,
            iteration_time_s=iteration_time,
        )


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


_PLACEMENT_COLS = ("placement", "local_bsz", "step_time", "sync_time")
_SCALABILITY_COLS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")


def _point(row: Row) -> tuple[float, float, float]:
    return (
        row.number("local_bsz", positive=True),
        row.number("step_time", positive=True),
        row.number("sync_time", minimum=0.0),
    )


def _last_iteration(path: Path) -> int:
    table = CsvTable(path, ("iteration",), fmt="pollux validation")
    last: Row | None = None
    for row in table.rows():
        last = row
    if last is None:
        raise TraceFormatError("no rows", source=str(path))
    return last.integer("iteration", minimum=1)


@lru_cache(maxsize=64)
def load_application(directory: Path) -> PolluxApplication:
    """The measured data of one application (cached per directory)."""
    return PolluxApplication(directory)


def available_applications(models_dir: Path | None = None) -> list[str]:
    """Applications with data in ``models_dir`` (default: the bundled ones)."""
    base = models_dir or default_models_dir()
    try:
        return sorted(p.name for p in base.iterdir() if (p / "placements.csv").is_file())
    except OSError:
        return []


def isolated_run(
    application: str, num_replicas: int, batch_size: int, models_dir: Path | None = None
) -> IsolatedRun:
    """Derive the isolated run of one job (see the module docstring)."""
    base = (models_dir or default_models_dir()).resolve()
    return load_application(base / application).isolated_run(num_replicas, batch_size)


def read(path: str | Path, models_dir: str | Path | None = None) -> list[JobSpec]:
    """Read a Pollux workload file and derive each job's isolated duration from the Pollux
    application data in ``models_dir`` (default: the bundled copy)."""
    base = Path(models_dir).resolve() if models_dir is not None else default_models_dir()
    table = CsvTable(Path(path), REQUIRED, fmt=NAME)
    out = JobCollector(table.source)
    known = available_applications(base)
    for row in table.rows():
        job_id = row.text("name")
        submit = row.number("time", minimum=0.0)
        app = row.text("application")
        replicas = row.integer("num_replicas", minimum=1)
        if replicas > MAX_REPLICAS:
            raise row.fail("num_replicas", row.raw("num_replicas"), f"must be <= {MAX_REPLICAS}")
        bsz = row.integer("batch_size", minimum=1)
        if bsz > MAX_BATCH_SIZE:
            raise row.fail("batch_size", row.raw("batch_size"), f"must be <= {MAX_BATCH_SIZE}")
        if app not in known:
            raise row.fail(
                "application",
                row.raw("application"),
                f"no Pollux model data for this application in {base}; known: {', '.join(known)}",
            )
        run = load_application(base / app).isolated_run(replicas, bsz)
        attrs: dict[str, Any] = {
            "application": app,
            "local_bsz": run.local_bsz,
            "atomic_bsz": run.atomic_bsz,
            "accum_steps": run.accum_steps,
            "placement": run.placement,
            "validation_batch_size": run.validation_batch_size,
        }
        out.add(
            row.line,
            "name",
            {
                "job_id": job_id,
                "submit_time_s": submit,
                "num_gpus": replicas,
                "duration_s": run.duration_s,
                "model": app,
                "batch_size": bsz,
                "iterations": run.iterations,
                "attrs": attrs,
            },
        )
    return out.finish()
