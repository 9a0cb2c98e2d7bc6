"""Run a sweep's missing cells on this machine, in a process pool.

Contract:

- A cell with a complete result file is skipped (resume = run the same command again).
- Each cell runs in a worker, which writes its result file itself (atomically,
  :func:`~slurm_sched.sweep.cells.write_atomic`); a cell's metrics are those of
  ``slurm-sched simulate`` with the same settings: both call
  :func:`slurm_sched.sim.sim_cli.run_policy` after the same world choice.
- A cell that raises is run once more; if it fails again, ``failed/<id>.json`` records the
  error and the traceback and the other cells still run. A worker process that dies breaks the
  pool: the pool is rebuilt and every cell that was running in it counts one attempt.
"""

from __future__ import annotations

import platform
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from slurm_sched.model import parse_cluster_spec
from slurm_sched.sim.sim_cli import resolve_world, run_policy
from slurm_sched.sweep import workload
from slurm_sched.sweep.cells import (
    SCHEMA,
    Cell,
    cell_id,
    failed_path,
    missing,
    result_path,
    write_atomic,
)

#: Attempts per cell before it is reported as failed.
ATTEMPTS = 2
#: Digits kept of each per-job JCT in a cell file (seconds); enough for CDFs.
JCT_DIGITS = 3


def simulate_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell; the cell file's content (definition, kept metrics, JCTs, run time)."""
    t0 = time.perf_counter()
    jobs = workload.load_jobs(cell.trace)
    cluster = parse_cluster_spec(cell.cluster)
    world = resolve_world([cell.policy_name], None if cell.world == "auto" else cell.world)
    t1 = time.perf_counter()
    res = run_policy(jobs, cluster, cell.policy_name, dict(cell.options),
                     restart_overhead_s=cell.restart_overhead_s, world=world)
    t2 = time.perf_counter()
    metrics = res.metrics.model_dump()
    payload: dict[str, Any] = {
        "schema": SCHEMA,
        "id": cell_id(cell),
        "cell": cell.to_dict(),
        "world_used": world,
        "metrics": {k: metrics[k] for k in cell.metrics} if cell.metrics else metrics,
        "runtime_s": round(t2 - t0, 4),
        "simulation_s": round(t2 - t1, 4),
        "host": platform.node(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if cell.keep_jcts:
        payload["jcts_s"] = sorted(round(c.jct_s, JCT_DIGITS) for c in res.completed)
    return payload


def execute(cell: Cell, out: Path) -> float:
    """Run ``cell`` and write its result file; the run time (seconds)."""
    payload = simulate_cell(cell)
    write_atomic(result_path(out, cell), payload)
    failed_path(out, cell).unlink(missing_ok=True)
    return float(payload["runtime_s"])


def record_failure(out: Path, cell: Cell, exc: BaseException, attempts: int) -> None:
    write_atomic(failed_path(out, cell), {
        "schema": SCHEMA, "id": cell_id(cell), "cell": cell.to_dict(), "attempts": attempts,
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": "".join(traceback.format_exception(exc)),
        "host": platform.node(), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })


class Progress:
    """A progress bar on stderr: cells done of the total, failures, elapsed time and ETA (a bar
    redrawn in place on a terminal, a line every 10 s otherwise)."""

    def __init__(self, total: int, *, already: int = 0, enabled: bool = True,
                 stream: TextIO | None = None) -> None:
        self.total = total
        self.done = already
        self.already = already
        self.failed = 0
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._t0 = time.monotonic()
        self._last = 0.0

    def update(self, done: int | None = None, failed: int | None = None,
               force: bool = False) -> None:
        if done is not None:
            self.done = done
        if failed is not None:
            self.failed = failed
        if not self.enabled:
            return
        now = time.monotonic()
        final = self.done + self.failed >= self.total
        if not (force or final) and now - self._last < (0.2 if self.tty else 10.0):
            return
        self._last = now
        elapsed = now - self._t0
        ran = self.done - self.already
        left = self.total - self.done - self.failed
        eta = f", ~{elapsed / ran * left:.0f}s left" if ran > 0 and left > 0 else ""
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(frac * 30)
        fail = f", {self.failed} failed" if self.failed else ""
        msg = (f"sweep [{bar:<30}] {self.done}/{self.total} cells{fail} "
               f"({elapsed:.0f}s{eta})")
        if self.tty:
            self.stream.write("\r" + msg + ("\n" if final else ""))
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()


@dataclass
class RunSummary:
    total: int
    skipped: int = 0
    ran: int = 0
    failed: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)


Executor = Callable[[Cell, Path], float]


def run_cells(cells: Sequence[Cell], out: Path, *, workers: int = 1,
              progress: Progress | None = None, executor: Executor | None = None) -> RunSummary:
    """Run the cells of ``cells`` that have no result in ``out``; ``workers`` > 1 uses a process
    pool. ``executor`` (default :func:`execute`) runs one cell; with a pool it must be a
    module-level function."""
    executor = executor or execute
    out.mkdir(parents=True, exist_ok=True)
    todo = missing(out, cells)
    summary = RunSummary(total=len(cells), skipped=len(cells) - len(todo))
    prog = progress or Progress(len(cells), enabled=False)
    prog.already = prog.done = summary.skipped
    prog.update(force=True)
    attempts: dict[str, int] = {}

    def finished(cell: Cell, exc: BaseException | None) -> Cell | None:
        """Account for one attempt; the cell to run again, if any."""
        cid = cell_id(cell)
        if exc is None:
            summary.ran += 1
            prog.update(done=prog.done + 1)
            return None
        attempts[cid] = attempts.get(cid, 0) + 1
        if attempts[cid] < ATTEMPTS:
            summary.retried.append(cid)
            return cell
        record_failure(out, cell, exc, attempts[cid])
        summary.failed.append(cid)
        prog.update(failed=len(summary.failed))
        return None

    queue = deque(todo)
    if workers <= 1:
        while queue:
            cell = queue.popleft()
            try:
                executor(cell, out)
                again = finished(cell, None)
            except Exception as e:  # a crashing cell is reported, the sweep goes on
                again = finished(cell, e)
            if again is not None:
                queue.appendleft(again)
        return summary
    pool = ProcessPoolExecutor(max_workers=workers)
    running: dict[Future[float], Cell] = {}
    try:
        while queue or running:
            while queue and len(running) < 2 * workers:
                cell = queue.popleft()
                running[pool.submit(executor, cell, out)] = cell
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            broken = False
            for fut in done:
                cell = running.pop(fut)
                exc = fut.exception()
                broken = broken or isinstance(exc, BrokenProcessPool)
                again = finished(cell, exc)
                if again is not None:
                    queue.appendleft(again)
            if broken:  # every future of a broken pool fails: start a fresh pool
                for cell in list(running.values()):
                    again = finished(cell, BrokenProcessPool("worker died"))
                    if again is not None:
                        queue.appendleft(again)
                running.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                pool = ProcessPoolExecutor(max_workers=workers)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return summary
