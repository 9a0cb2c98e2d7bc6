"""Run a sweep's missing cells as one Slurm job array (``slurm-sched sweep run --slurm``).

Contract:

- The missing cells are frozen in a manifest, ``<out>/.sweep/manifest-<stamp>.json``: a list of
  ``K`` chunks of cell ids (cell ``j`` of the missing list goes to chunk ``j mod K``).
- One ``sbatch --array=0-(K-1)[%N]`` job; task ``i`` runs
  ``slurm-sched sweep run-chunk GRID --out DIR --chunk i --chunks K --manifest M``, which runs
  the cells of chunk ``i`` that have no result file yet (in one process, each cell retried once,
  like a local run).
- A cell file is only ever created by ``os.replace`` of a complete temporary file
  (:func:`~slurm_sched.sweep.cells.write_atomic`), and run-chunk skips present cells, so no cell
  is run twice into the same file by this submitter.
- Waiting polls the output folder (progress = result files that arrived) and ``squeue``; once
  the array has left the queue, the tasks whose chunk still has a cell with neither a result
  nor a ``failed/`` record are submitted again (``--array=<their indices>``), at most
  ``resubmits`` times. Cells still missing after that are reported.
- Every Slurm command goes through a :class:`Runner` (tests give a fake one); this module does
  not use :mod:`slurm_sched.slurm`.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurm_sched.errors import SlurmCommandError
from slurm_sched.sweep.cells import Cell, cell_id, failed_path, is_done, write_atomic
from slurm_sched.sweep.run_local import Progress

STATE_DIR = ".sweep"
#: Slurm's default MaxArraySize is 1001 (indices 0..1000).
MAX_CHUNKS = 1000


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str


class Runner:
    """Runs one command (argv, no shell) and returns what it printed."""

    def __init__(self, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s

    def run(self, argv: Sequence[str]) -> Result:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=self.timeout_s,
                           check=False)
        return Result(p.returncode, p.stdout, p.stderr)


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    array_limit: int | None = None  # at most N tasks at once (%N)
    time: str | None = None  # each task's --time
    chunks: int | None = None  # default: one task per missing cell, at most MAX_CHUNKS
    poll_s: float = 30.0
    resubmits: int = 1
    job_name: str = "sweep"


def chunk(ids: Sequence[str], k: int) -> list[list[str]]:
    """``k`` chunks (none empty when ``k <= len(ids)``): id ``j`` goes to chunk ``j mod k``."""
    k = max(1, min(k, len(ids)))
    return [list(ids[i::k]) for i in range(k)]


def write_manifest(out: Path, grid: Path, chunks: list[list[str]]) -> Path:
    path = out / STATE_DIR / f"manifest-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
    write_atomic(path, {"grid": str(grid), "chunks": chunks})
    return path


def read_manifest(path: Path) -> list[list[str]]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return [list(c) for c in doc["chunks"]]


def array_spec(indices: Sequence[int], limit: int | None) -> str:
    """``0-9`` for a contiguous range from 0, ``2,5,7`` otherwise; ``%N`` when limited."""
    ids = sorted(indices)
    spec = (f"{ids[0]}-{ids[-1]}" if len(ids) > 1 and ids == list(range(ids[0], ids[-1] + 1))
            else ",".join(map(str, ids)))
    return f"{spec}%{limit}" if limit else spec


def sbatch_argv(grid: Path, out: Path, manifest: Path, k: int, indices: Sequence[int],
                opts: SlurmOptions, python: str = sys.executable) -> list[str]:
    """The ``sbatch`` command line of (a resubmission of) the array."""
    task = [python, "-m", "slurm_sched.cli", "sweep", "run-chunk", str(grid.resolve()),
            "--out", str(out.resolve()), "--chunks", str(k), "--manifest",
            str(manifest.resolve())]
    wrap = " ".join(shlex.quote(a) for a in task) + ' --chunk "$SLURM_ARRAY_TASK_ID"'
    argv = ["sbatch", "--parsable", f"--job-name={opts.job_name}",
            f"--array={array_spec(indices, opts.array_limit)}",
            f"--output={(out / STATE_DIR / 'logs' / '%A_%a.out').resolve()}",
            f"--chdir={Path.cwd()}"]
    if opts.partition:
        argv.append(f"--partition={opts.partition}")
    if opts.time:
        argv.append(f"--time={opts.time}")
    return [*argv, f"--wrap={wrap}"]


@dataclass
class SlurmSummary:
    job_ids: list[str] = field(default_factory=list)
    manifest: Path | None = None
    missing: list[str] = field(default_factory=list)  # neither result nor failure record
    failed: list[str] = field(default_factory=list)


def _submit(runner: Runner, argv: list[str]) -> str:
    res = runner.run(argv)
    if res.rc != 0:
        raise SlurmCommandError(argv, res.rc, res.stderr)
    return res.stdout.strip().split(";")[0]  # --parsable: "jobid[;cluster]"


def array_active(runner: Runner, job_id: str) -> bool:
    """Whether any task of the array is still queued or running."""
    res = runner.run(["squeue", "--noheader", "--array", f"--jobs={job_id}", "--format=%i %T"])
    if res.rc != 0:
        if "invalid job id" in res.stderr.lower():
            return False  # gone from slurmctld's memory
        raise SlurmCommandError(["squeue", f"--jobs={job_id}"], res.rc, res.stderr)
    return any(line.strip() for line in res.stdout.splitlines())


def submit_and_wait(cells: Sequence[Cell], grid: Path, out: Path, opts: SlurmOptions,
                    *, runner: Runner | None = None, wait: bool = True,
                    progress: Progress | None = None,
                    sleep: Callable[[float], None] = time.sleep) -> SlurmSummary:
    """Submit the missing cells of ``cells`` as one array and (unless ``wait`` is false)
    wait for it, resubmitting the tasks of cells that did not arrive."""
    runner = runner or Runner()
    by_id = {cell_id(c): c for c in cells}
    todo = [cid for cid, c in by_id.items() if not is_done(out, c)]
    summary = SlurmSummary()
    if not todo:
        return summary
    for cid in todo:  # a record of an earlier run: this submission runs the cell again
        failed_path(out, by_id[cid]).unlink(missing_ok=True)
    k = min(opts.chunks or len(todo), MAX_CHUNKS, len(todo))
    chunks = chunk(todo, k)
    summary.manifest = write_manifest(out, grid, chunks)
    # slurmd fails the launch of an array element whose --output folder is missing
    (out / STATE_DIR / "logs").mkdir(parents=True, exist_ok=True)
    indices = list(range(len(chunks)))
    prog = progress or Progress(len(cells), enabled=False)
    done_before = len(cells) - len(todo)
    for attempt in range(opts.resubmits + 1):
        argv = sbatch_argv(grid, out, summary.manifest, len(chunks), indices, opts)
        summary.job_ids.append(_submit(runner, argv))
        if not wait:
            return summary
        while True:
            arrived = sum(1 for cid in todo if is_done(out, by_id[cid]))
            failed = sum(1 for cid in todo
                         if failed_path(out, by_id[cid]).exists() and not is_done(out, by_id[cid]))
            prog.update(done=done_before + arrived, failed=failed)
            if not array_active(runner, summary.job_ids[-1]):
                break
            sleep(opts.poll_s)
        lost = [i for i, ids in enumerate(chunks)
                if any(not is_done(out, by_id[c]) and not failed_path(out, by_id[c]).exists()
                       for c in ids)]
        if not lost or attempt == opts.resubmits:
            break
        indices = lost
    summary.failed = [c for c in todo if not is_done(out, by_id[c])
                      and failed_path(out, by_id[c]).exists()]
    summary.missing = [c for c in todo if not is_done(out, by_id[c])
                       and not failed_path(out, by_id[c]).exists()]
    prog.update(force=True)
    return summary


def chunk_cells(cells: Sequence[Cell], manifest: Path | None, index: int, k: int) -> list[Cell]:
    """The cells task ``index`` runs: its chunk of the manifest, or, without a manifest, of
    every cell of the grid (cell ``j`` to chunk ``j mod k``)."""
    if not 0 <= index < k:
        raise ValueError(f"chunk {index} outside 0..{k - 1}")
    if manifest is None:
        return list(cells[index::k])
    chunks = read_manifest(manifest)
    if len(chunks) != k:
        raise ValueError(f"{manifest} has {len(chunks)} chunks, not {k}")
    by_id = {cell_id(c): c for c in cells}
    unknown = [c for c in chunks[index] if c not in by_id]
    if unknown:
        raise ValueError(f"{manifest} names cells the grid does not have: {unknown[:3]}")
    return [by_id[c] for c in chunks[index]]
