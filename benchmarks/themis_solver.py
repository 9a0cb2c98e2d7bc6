"""Themis on the Muri traces with the artifact's own min-max solver (cvxpy with ECOS).

The min-max allocation of Themis (``slurm_sched/policy/themis.py``) is not unique: the level is
set by the one job furthest behind, and every other job may take any share between the least
that reaches that level and 1, as long as the GPUs suffice. Our solver takes the least point;
the artifact (``themis_sim_jobs``) takes whatever point ECOS, an interior-point solver, stops
at, and ranks jobs by that point. This runs our Themis, in the ``muri-artifact`` profile, with
the allocation solved the artifact's way (the same problem given to cvxpy/ECOS), next to the
published averages.

cvxpy and ECOS are not dependencies of slurm_sched; install them beside it first:

    .venv/bin/python -m pip install cvxpy==1.9.3 ecos==2.0.14
    .venv/bin/python benchmarks/themis_solver.py                    # six traces, about 15 min
    .venv/bin/python benchmarks/themis_solver.py --traces trace3_pr   # one

Writes ``benchmarks/results/themis_solver.json``; ``docs/reproductions/crosscheck.md`` quotes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import crosscheck as xc

from slurm_sched.policy.themis import min_max_allocation

OUT = xc.ROOT / "benchmarks" / "results" / "themis_solver.json"


class EcosAllocator:
    """The artifact's min-max problem, solved by ECOS through cvxpy. Counts the solves whose
    status is not "optimal" (ECOS's "optimal_inaccurate": the artifact uses those too) and the
    ones ECOS fails outright, which take our exact solver's point instead (the artifact would
    stop there; its slightly different numbers did not make ECOS fail on its runs)."""

    def __init__(self) -> None:
        self.solves = 0
        self.inaccurate = 0
        self.failed = 0

    def __call__(self, gpus: np.ndarray, age_s: np.ndarray, rem_s: np.ndarray,
                 denom_s: np.ndarray, capacity: float) -> np.ndarray:
        import cvxpy as cp

        n = len(rem_s)
        x = cp.Variable(n)
        level = age_s / denom_s + cp.multiply(rem_s / denom_s, cp.inv_pos(x))
        problem = cp.Problem(cp.Minimize(cp.max(level)), [x >= 0, x <= 1, gpus @ x <= capacity])
        self.solves += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Solution may be inaccurate": counted below
            try:
                problem.solve(solver="ECOS")
            except cp.error.SolverError:
                self.failed += 1
                return min_max_allocation(gpus, age_s, rem_s, denom_s, capacity)
        if problem.status != "optimal":
            self.inaccurate += 1
        out = np.asarray(x.value, dtype=float)
        out[rem_s <= 0] = 0.0
        return out


def run_trace(trace: str) -> dict[str, object]:
    art = xc.ARTIFACTS["muri"]
    solver = EcosAllocator()
    started = time.monotonic()
    res = xc.run(art, xc.muri_trace(trace), "themis", "artifact",
                 xc.Change({"allocator": solver}, {}))
    jcts = [c.jct_s for c in res.completed]
    theirs = xc.MURI_PUBLISHED_AVG_S["themis"][trace]
    avg = sum(jcts) / len(jcts)
    return {"trace": trace, "avg_jct_s": avg, "theirs_avg_jct_s": theirs, "ratio": avg / theirs,
            "solves": solver.solves, "inaccurate_solves": solver.inaccurate,
            "failed_solves": solver.failed,
            "wall_s": round(time.monotonic() - started, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", default=",".join(xc.MURI_TRACES))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    try:
        import cvxpy  # noqa: F401
        import ecos  # noqa: F401
    except ImportError as e:
        print(f"themis_solver: {e.name} is missing; it is the artifact's solver, not a "
              "dependency of slurm_sched: pip install cvxpy==1.9.3 ecos==2.0.14",
              file=sys.stderr)
        return 2
    runs = json.loads(args.out.read_text())["runs"] if args.out.exists() else {}
    traces = [t for t in args.traces.split(",") if t]
    for i, trace in enumerate(traces, 1):
        print(f"[{i}/{len(traces)}] themis on {trace} with ECOS ...", end=" ", flush=True)
        row = run_trace(trace)
        runs[trace] = row
        print(f"ours {row['avg_jct_s']:,.0f} s, theirs {row['theirs_avg_jct_s']:,.0f} s, "
              f"ratio {row['ratio']:.3f} ({row['solves']} solves, "
              f"{row['inaccurate_solves']} inaccurate, {row['failed_solves']} failed, "
              f"{row['wall_s']} s)", flush=True)
        args.out.write_text(json.dumps({"runs": dict(sorted(runs.items()))}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
