"""How far Pollux's own simulator is from itself: runs of it with other seeds, job by job.

The artifact's Pollux policy (petuum/adaptdl ``simulator/pollux.py``) allocates with a genetic
algorithm (pymoo's NSGA-II, random crossover, mutation and repair) and the simulator seeds no
random generator, so its published run is one draw. ``benchmarks/peer/pollux/runs/`` holds runs
of the artifact's own code on a few workloads with fixed seeds (how they were made:
``benchmarks/peer/README.md``). This compares every pair among the published run, those runs
and ours (``pollux`` in the ``pollux-artifact`` profile): the ratio of average JCTs and the
share of jobs whose completion time is within 1% (the measure of ``crosscheck.py``), each run
against each other as the reference; and, per run, when the ``--watch`` jobs first got a GPU.
Where a stored run was stopped early (``until_s``), every run is compared as far as that.

    python benchmarks/pollux_spread.py --watch cifar10-141     # seconds

Writes ``benchmarks/results/pollux_spread.json``; ``docs/reproductions/crosscheck.md`` quotes it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import crosscheck as xc  # noqa: E402

RUNS = xc.PEER / "pollux" / "runs"
OUT = BENCH / "results" / "pollux_spread.json"


def artifact_runs(directory: Path = RUNS) -> dict[str, dict]:
    """The stored runs of the artifact's own code: ``<load>-<workload>-seed<N>[-<variant>].json``
    -> its contents: ``trace``, ``seed``, ``until_s`` (the simulated time the run was stopped
    at, null when it ran to the end), ``jcts`` of the jobs that ended, ``first_gpu_s`` (job ->
    when it first got a GPU, null for never) and, for a run of the artifact's code with one
    change, ``variant`` (what was changed)."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


def run_label(run: dict) -> str:
    """``seed N``, and the variant of a run with one change (``seed 1, converged fit``)."""
    variant = run.get("variant")
    return f"seed {run['seed']}" + (f", {variant}" if variant else "")


def published(trace: str) -> dict[str, float]:
    """The published per-job JCTs of the artifact's Pollux on ``trace``
    (``workloads-<load>/workload-<n>``), as the cross-check reads them."""
    ref = next(p.reference for p in xc.pollux_pairs() if p.trace == trace and p.policy == "pollux")
    assert ref.jobs is not None, f"no per-job output of Pollux on {trace}"
    return ref.jobs


def ours(trace: str) -> tuple[dict[str, float], dict[str, float | None]]:
    """Our Pollux on ``trace`` in the artifact profile: JCTs and first starts (job -> s)."""
    artifact = xc.ARTIFACTS["pollux"]
    done = xc.run(artifact, artifact.trace(trace), "pollux", "artifact").completed
    first: dict[str, float | None] = {c.spec.job_id: c.first_start_s for c in done}
    return {c.spec.job_id: c.jct_s for c in done}, first


def agreement(runs: dict[str, dict[str, float]], submit: dict[str, float],
              until_s: float | None = None) -> list[dict]:
    """Every ordered pair (row, reference) of ``runs`` (name -> job -> JCT of the jobs that
    ended): the ratio of average JCTs over the jobs that ended in both, and the share of the
    reference's jobs whose end the row's is within 1% of.

    With ``until_s`` (some runs were stopped there), a job that ended in the reference but not
    in the row counts as outside 1% when the reference's end is more than 1% before
    ``until_s``, and is left out of the share otherwise (its end cannot be told apart)."""
    rows = []
    tol = xc.JOB_TOLERANCE
    for a, jobs_a in runs.items():
        for b, jobs_b in runs.items():
            if a == b:
                continue
            agree = compared = 0
            for j, jct_b in jobs_b.items():
                end_b = submit[j] + jct_b
                if j in jobs_a:
                    compared += 1
                    agree += abs(jobs_a[j] - jct_b) <= tol * end_b
                elif until_s is not None and end_b * (1 + tol) < until_s:
                    compared += 1  # the row's end is past until_s: more than 1% later
            both = sorted(set(jobs_a) & set(jobs_b))
            rows.append({
                "run": a, "reference": b, "jobs_compared": compared,
                "jobs_in_both": len(both),
                "avg_ratio": sum(jobs_a[j] for j in both) / sum(jobs_b[j] for j in both),
                "end_within_1pct": agree / compared,
            })
    return rows


def waits(first_gpu: dict[str, float | None], submit: dict[str, float],
          jobs: Sequence[str]) -> dict[str, float | None]:
    """Seconds from submission to the first GPU, for ``jobs``."""
    return {j: (None if first_gpu.get(j) is None else float(first_gpu[j]) - submit[j])
            for j in jobs}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--runs", type=Path, default=RUNS)
    ap.add_argument("--watch", default="", help="comma-separated jobs whose waits to report")
    args = ap.parse_args(argv)
    stored = artifact_runs(args.runs)
    if not stored:
        print(f"no runs in {args.runs}", file=sys.stderr)
        return 2
    results = {}
    for trace in sorted({r["trace"] for r in stored.values()}):
        submit = {j.job_id: j.submit_time_s for j in xc.ARTIFACTS["pollux"].trace(trace)}
        mine, mine_first = ours(trace)
        runs: dict[str, dict[str, float]] = {"published": published(trace)}
        first: dict[str, dict[str, float | None]] = {"ours": mine_first}
        stops = []
        for r in (r for r in stored.values() if r["trace"] == trace):
            label = run_label(r)
            runs[label] = {k: float(v) for k, v in r["jcts"].items()}
            first[label] = r["first_gpu_s"]
            if r["until_s"]:
                stops.append(r["until_s"])
        runs["ours"] = mine
        until = min(stops) if stops else None
        if until is not None:  # every run as far as the shortest one went
            runs = {k: {j: t for j, t in v.items() if submit[j] + t <= until}
                    for k, v in runs.items()}
        watch = [j for j in args.watch.split(",") if j in submit]
        results[trace] = {
            "until_s": until,
            "jobs_ended": {k: len(v) for k, v in runs.items()},
            "pairs": agreement(runs, submit, until),
            "waits_s": {k: waits(v, submit, watch) for k, v in first.items()},
        }
        print(f"{trace}{f' until {until:,.0f} s' if until else ''}: run vs reference, "
              "avg ratio (jobs ended in both), ends within 1% (jobs compared)")
        for row in results[trace]["pairs"]:
            print(f"  {row['run']:>9} vs {row['reference']:<9} {row['avg_ratio']:.3f} "
                  f"({row['jobs_in_both']})  {row['end_within_1pct']:.1%} "
                  f"({row['jobs_compared']})")
        for name, w in results[trace]["waits_s"].items() if watch else ():
            print(f"  first GPU, {name}: " + ", ".join(
                f"{j} {'never' if v is None else f'{v:,.0f} s'}" for j, v in w.items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"traces": results}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
