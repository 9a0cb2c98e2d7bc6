"""Themis on the Muri traces with the artifact's own min-max solver (cvxpy with ECOS).

The min-max allocation of Themis (``slurm_sched/policy/themis.py``) is not unique: the level is
set by the one job furthest behind, and every other job may take any share between the least
that reaches that level and 1, as long as the GPUs suffice. Our solver takes the least point;
the artifact (``themis_sim_jobs``) takes whatever point ECOS, an interior-point solver, stops
at, and ranks jobs by that point. This runs our Themis, in the ``muri-artifact`` profile, with
the allocation solved the artifact's way, next to the published averages and, where the
artifact's own per-job output exists (trace 3, ``benchmarks/peer/muri/trace3/themis.csv``), job by
job. Two forms of the problem (``--form``):

- ``vector``: ours, given to cvxpy/ECOS: ``max_i (age_i + rem_i / x_i) / denom_i`` in seconds;
- ``literal``: the problem as ``themis_sim_jobs`` builds it: per job ``(age + remaining
  iterations x inv_pos(tput x x)) / isolated`` with ``tput = 1 / (iteration time x 1.015)``, the
  maximum over a Python list (``cp.maximum(*terms)``), the variables in the order of its
  runnable list (the previous event's rank order, re-sorted by GPU count, descending and stable,
  newly arrived jobs appended). Interior-point iterates depend on that scaling and order.

cvxpy and ECOS are not dependencies of slurm_sched; install them beside it first:

    .venv/bin/python -m pip install cvxpy==1.9.3 ecos==2.0.14
    .venv/bin/python benchmarks/themis_solver.py                    # six traces, 20-30 min
    .venv/bin/python benchmarks/themis_solver.py --traces trace3_pr   # one
    .venv/bin/python benchmarks/themis_solver.py --traces trace3 --form literal   # about 10 min

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

from slurm_sched.model import ClusterSnapshot, JobView
from slurm_sched.perf.muri_stages import ISO_FACTOR, iso_iteration_ms
from slurm_sched.policy.themis import Themis, min_max_allocation
from slurm_sched.sim import profile as profiles

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
        if not self.solve(problem):
            return min_max_allocation(gpus, age_s, rem_s, denom_s, capacity)
        out = np.asarray(x.value, dtype=float)
        out[rem_s <= 0] = 0.0
        return out

    def solve(self, problem: object) -> bool:
        """Solve a cvxpy ``problem`` with ECOS and count it; False if ECOS failed."""
        import cvxpy as cp

        self.solves += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Solution may be inaccurate": counted below
            try:
                problem.solve(solver="ECOS")  # type: ignore[attr-defined]
            except cp.error.SolverError:
                self.failed += 1
                return False
        if problem.status != "optimal":  # type: ignore[attr-defined]
            self.inaccurate += 1
        return True


class LiteralEcosAllocator(EcosAllocator):
    """The artifact's problem built the way ``themis_sim_jobs`` builds it (module docstring),
    solved by ECOS. It needs the jobs behind the arrays and the time: :class:`SeenThemis` hands
    them over before each solve."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[JobView] = []
        self.now_s = 0.0
        self._order: list[str] = []  # the artifact's runnable list after the previous event
        self._should_s: dict[str, float] = {}
        self._last_event_s = 0.0

    def __call__(self, gpus: np.ndarray, age_s: np.ndarray, rem_s: np.ndarray,
                 denom_s: np.ndarray, capacity: float) -> np.ndarray:
        import cvxpy as cp

        ids = [j.spec.job_id for j in self.jobs]
        at = {jid: i for i, jid in enumerate(ids)}
        known = set(self._order)
        order = [at[j] for j in self._order if j in at] + [i for i, j in enumerate(ids)
                                                          if j not in known]
        x = cp.Variable(len(order))
        terms = []
        for k, i in enumerate(order):
            spec = self.jobs[i].spec
            it_s = spec.iteration_time_s or 1.0  # work (s of duration) per iteration
            tput = 1000.0 / ((iso_iteration_ms(spec) or it_s * 1000.0) * ISO_FACTOR)
            terms.append((age_s[i] + rem_s[i] / it_s * cp.inv_pos(tput * x[k])) / denom_s[i])
        goal = terms[0] if len(terms) == 1 else cp.maximum(*terms)
        problem = cp.Problem(cp.Minimize(goal), [x >= 0, x <= 1, gpus[order] @ x <= capacity])
        if self.solve(problem):
            out = np.zeros(len(ids))
            out[order] = np.asarray(x.value, dtype=float)
        else:
            out = min_max_allocation(gpus, age_s, rem_s, denom_s, capacity)
        out[rem_s <= 0] = 0.0
        self._remember(order, out, gpus)
        return out

    def _remember(self, order: list[int], x: np.ndarray, gpus: np.ndarray) -> None:
        """The runnable list the artifact's next event starts from: this event's rank order
        (rounds received, deficit, allocation; descending), then re-sorted by GPU count."""
        now = self.now_s
        keys = {}
        for i in order:
            jid = self.jobs[i].spec.job_id
            executed = self.jobs[i].executed_at(now)
            should = self._should_s.get(jid, 0.0)
            rounds = x[i] * 1e9 if executed == 0 else x[i] / executed
            keys[i] = (rounds, should - executed, x[i])
            self._should_s[jid] = should + x[i] * (now - self._last_event_s)
        self._last_event_s = now
        ranked = sorted(order, key=lambda i: keys[i], reverse=True)
        ranked.sort(key=lambda i: gpus[i], reverse=True)
        self._order = [self.jobs[i].spec.job_id for i in ranked]


class SeenThemis(Themis):
    """Themis that shows :class:`LiteralEcosAllocator` the jobs and the time of each plan."""

    def __init__(self, allocator: LiteralEcosAllocator, **options: object) -> None:
        super().__init__(allocator=allocator, **options)  # type: ignore[arg-type]
        self.literal = allocator

    def decide(self, snapshot: ClusterSnapshot, now_s: float):  # type: ignore[no-untyped-def]
        self.literal.jobs = list(snapshot.jobs)
        self.literal.now_s = now_s
        return super().decide(snapshot, now_s)


def run_trace(trace: str, form: str) -> dict[str, object]:
    from slurm_sched.sim.runner import simulate

    art = xc.ARTIFACTS["muri"]
    jobs = xc.muri_trace(trace)
    started = time.monotonic()
    if form == "vector":
        solver: EcosAllocator = EcosAllocator()
        res = xc.run(art, jobs, "themis", "artifact", xc.Change({"allocator": solver}, {}))
    else:
        literal = LiteralEcosAllocator()
        solver = literal
        prof = profiles.get(art.profile)
        options = dict(prof.policy_options.get("themis", {}))
        res = simulate(jobs, art.cluster(), SeenThemis(literal, **options), profile=prof)
    jcts = {c.spec.job_id: c.jct_s for c in res.completed}
    ref = next(p.reference for p in art.pairs() if p.trace == trace and p.policy == "themis")
    avg = sum(jcts.values()) / len(jcts)
    row: dict[str, object] = {
        "trace": trace, "form": form, "avg_jct_s": avg, "theirs_avg_jct_s": ref.avg_jct_s,
        "ratio": avg / ref.avg_jct_s, "solves": solver.solves,
        "inaccurate_solves": solver.inaccurate, "failed_solves": solver.failed,
        "wall_s": round(time.monotonic() - started, 1)}
    if ref.jobs is not None:
        submit = {j.job_id: j.submit_time_s for j in jobs}
        row["per_job"] = xc.compare_jobs(jcts, ref.jobs, submit)
        row["per_job_source"] = ref.source
    return row


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", default=",".join(xc.MURI_TRACES))
    ap.add_argument("--form", choices=["vector", "literal"], default="vector",
                    help="how the problem is posed to ECOS (module docstring)")
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
        print(f"[{i}/{len(traces)}] themis on {trace} with ECOS, {args.form} form ...",
              end=" ", flush=True)
        row = run_trace(trace, args.form)
        runs[trace if args.form == "vector" else f"{trace}@{args.form}"] = row
        pj = row.get("per_job")
        print(f"ours {row['avg_jct_s']:,.0f} s, theirs {row['theirs_avg_jct_s']:,.0f} s, "
              f"ratio {row['ratio']:.3f} ({row['solves']} solves, "
              f"{row['inaccurate_solves']} inaccurate, {row['failed_solves']} failed, "
              f"{row['wall_s']} s)"
              + (f"; jobs within 1%: {pj['end_within_1pct']:.1%} by end, "  # type: ignore[index]
                 f"{pj['jct_within_1pct']:.1%} by JCT" if pj else ""), flush=True)
        args.out.write_text(json.dumps({"runs": dict(sorted(runs.items()))}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
