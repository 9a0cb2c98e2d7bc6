"""Benchmark: a 200-cell sweep run locally with ``-j 2``, every cell checked against
``slurm-sched simulate``.

    python benchmarks/bench_sweep.py                       # -> benchmarks/results/sweep.json
    python benchmarks/bench_sweep.py --grid G.toml --out /tmp/sweep.json --jobs 4

The grid (default ``benchmarks/grids/all-policies-200.toml``) holds every baseline and paper
policy on the bundled traces and the SJF-BSBF loads. Measured:

1. ``slurm-sched sweep run GRID --out DIR -j N --quiet`` in a fresh folder: its wall time, and
   the sum of the cells' own run times (``runtime_s`` in each cell file), so the pool's overhead
   and its parallel speed-up are visible.
2. For every cell, ``slurm-sched simulate --format json`` with the same policy, options, trace
   (a generated workload is written to CSV first, as ``python -m slurm_sched.workloads.sjf_bsbf``
   writes it), cluster, world and restart overhead, N at a time: each metric the cell kept must
   be equal, compared with ``==`` on the parsed JSON (bit for bit for the floats). A
   difference is listed in the result and makes the script exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slurm_sched.sweep.cells import Cell, cell_id, read_result, result_path
from slurm_sched.sweep.grid import load_and_expand
from slurm_sched.workloads import sjf_bsbf

HERE = Path(__file__).resolve().parent
GRID = HERE / "grids" / "all-policies-200.toml"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "slurm_sched.cli", *args]


def simulate_argv(cell: Cell, trace_file: str) -> list[str]:
    """The ``slurm-sched simulate`` command line of one cell."""
    argv = _cli("simulate", "--policy", cell.policy_name, "--trace", trace_file, "--cluster",
                cell.cluster, "--progress-model", cell.world, "--restart-overhead-s",
                repr(cell.restart_overhead_s), "--format", "json", "--quiet")
    if cell.trace.get("format"):
        argv += ["--trace-format", cell.trace["format"]]
    if cell.trace.get("limit"):
        argv += ["--limit", str(cell.trace["limit"])]
    for key, value in cell.options.items():
        argv += ["-o", f"{key}={json.dumps(value)}"]
    return argv


def trace_file(cell: Cell, work: Path) -> str:
    """The trace ``simulate`` reads for ``cell``: the file itself, or the generated workload
    written to CSV (one file per load and seed)."""
    t = cell.trace
    if t.get("generator") is None:
        return str(t["file"])
    if t["generator"] != "sjf-bsbf":
        raise SystemExit(f"no CSV writer for generator {t['generator']!r}")
    path = work / f"{t['generator']}-n{t['jobs']}-s{t['seed']}.csv"
    if not path.exists():
        sjf_bsbf.write_csv(sjf_bsbf.generate(t["jobs"], t["seed"], **t.get("params", {})), path)
    return str(path)


def check_cell(cell: Cell, out: Path, work: Path) -> dict[str, Any]:
    """One cell against ``simulate``: ``{"cell", "equal", "fields", "differences"}``."""
    doc = read_result(result_path(out, cell), cell)
    if doc is None:
        return {"cell": cell_id(cell), "equal": False, "differences": ["no result file"]}
    p = subprocess.run(simulate_argv(cell, trace_file(cell, work)), capture_output=True,
                       text=True, check=False)
    if p.returncode != 0:
        return {"cell": cell_id(cell), "equal": False,
                "differences": [f"simulate failed: {p.stderr.strip()[-300:]}"]}
    (want,) = json.loads(p.stdout)
    got = doc["metrics"]
    diffs = [f"{k}: sweep {got[k]!r} != simulate {want.get(k)!r}" for k in got
             if got[k] != want.get(k)]
    return {"cell": cell_id(cell), "equal": not diffs, "fields": len(got), "differences": diffs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", type=Path, default=GRID)
    ap.add_argument("--jobs", type=int, default=2, help="sweep -j and parallel simulate runs")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "sweep.json")
    ap.add_argument("--work", type=Path, default=None,
                    help="folder of the cell files (default: a fresh temporary folder)")
    args = ap.parse_args(argv)
    _, cells = load_and_expand(args.grid)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    cells_dir = work / "cells"
    if cells_dir.exists() and any(cells_dir.glob("*.json")):
        raise SystemExit(f"{cells_dir} already holds cell files: the run must start empty")
    print(f"{len(cells)} cells, -j {args.jobs}, into {cells_dir}", file=sys.stderr)
    t0 = time.perf_counter()
    run = subprocess.run(_cli("sweep", "run", str(args.grid), "--out", str(cells_dir), "-j",
                              str(args.jobs), "--quiet"), check=False)
    wall_s = time.perf_counter() - t0
    if run.returncode != 0:
        print(f"sweep run exited {run.returncode}", file=sys.stderr)
        return 1
    docs = [read_result(result_path(cells_dir, c), c) for c in cells]
    cell_cpu_s = sum(float(d["runtime_s"]) for d in docs if d is not None)
    print(f"sweep: {wall_s:.1f} s wall, {cell_cpu_s:.1f} s in cells; checking against "
          "simulate", file=sys.stderr)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        checks = list(pool.map(lambda c: check_cell(c, cells_dir, work), cells))
    check_s = time.perf_counter() - t0
    unequal = [c for c in checks if not c["equal"]]
    slowest = sorted(((float(d["runtime_s"]), d["id"]) for d in docs if d is not None),
                     reverse=True)[:5]
    result = {
        "benchmark": "sweep",
        "grid": str(args.grid.relative_to(HERE.parent) if args.grid.is_relative_to(HERE.parent)
                    else args.grid),
        "cells": len(cells),
        "workers": args.jobs,
        "wall_s": round(wall_s, 1),
        "cells_runtime_sum_s": round(cell_cpu_s, 1),
        "parallel_speedup": round(cell_cpu_s / wall_s, 2),
        "slowest_cells_s": [{"cell": i, "runtime_s": s} for s, i in slowest],
        "checked_against_simulate": len(checks),
        "equal_to_simulate": len(checks) - len(unequal),
        "metric_fields_compared": sum(c.get("fields", 0) for c in checks),
        "differences": unequal,
        "check_wall_s": round(check_s, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("cells", "wall_s", "cells_runtime_sum_s",
                                             "equal_to_simulate")}))
    return 1 if unequal else 0


if __name__ == "__main__":
    sys.exit(main())
