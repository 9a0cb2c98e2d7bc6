"""Our Pollux against Pollux's own simulator running our search, job by job.

The artifact's Pollux policy (petuum/adaptdl ``simulator/pollux.py``) allocates with a genetic
algorithm (pymoo's NSGA-II, random, unseeded); ours with a greedy marginal-gain search
(:mod:`slurm_sched.policy.pollux`). ``benchmarks/peer/pollux/runs-our-search/`` holds runs of
the artifact's code with its search replaced by ours and every job's throughput model fitted
once on all of its application's measurements, as ours is (what was changed, and how the runs
were made: ``benchmarks/peer/README.md``); they draw no random number. With the search made
the same, what is left between those runs and ours (``pollux`` in the ``pollux-artifact``
profile) is the world and the policy's terms; between them and the published runs, the search
and the online fit. Per workload this prints and stores the ratio of average JCTs and the
share of jobs whose end (and whose JCT) is within 1%, for ours against those runs and for the
published runs against them.

    python benchmarks/pollux_search.py                         # all 24 workloads, ~1 minute
    python benchmarks/pollux_search.py -o grad_stats=requested # a policy option changed: printed
    python benchmarks/pollux_search.py --set round_s=null      # a profile field changed: printed
    python benchmarks/pollux_search.py --report-only           # the table, from the JSON

Writes ``benchmarks/results/pollux_search.json`` (not with ``-o`` or ``--set``);
``docs/reproductions/crosscheck.md`` quotes it.
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
from pollux_spread import published  # noqa: E402

RUNS = xc.PEER / "pollux" / "runs-our-search"
OUT = BENCH / "results" / "pollux_search.json"
#: The workloads the Pollux-artifact profile's settings were chosen on (crosscheck.md).
TUNING = ("workloads-0.5/workload-1", "workloads-0.5/workload-2",
          "workloads-1.5/workload-1", "workloads-1.5/workload-2")


def stored_runs(directory: Path = RUNS) -> dict[str, dict]:
    """``<load>-<workload>.json`` -> its run: ``trace`` (``workloads-<load>/workload-<n>``),
    ``variant``, and ``jcts`` (job -> completion - submission, seconds, every job ended)."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


def compare(trace: str, theirs: dict[str, float], change: xc.Change = xc.NO_CHANGE) -> dict:
    """Ours (the profile with ``change``) and the published run, each against the artifact's
    run with our search (``theirs``) on ``trace``."""
    artifact = xc.ARTIFACTS["pollux"]
    jobs = artifact.trace(trace)
    submit = {j.job_id: j.submit_time_s for j in jobs}
    done = xc.run(artifact, jobs, "pollux", "artifact", change).completed
    ours = {c.spec.job_id: c.jct_s for c in done}
    avg = sum(theirs.values()) / len(theirs)
    out: dict[str, object] = {"trace": trace, "tuning": trace in TUNING,
                              "their_avg_jct_s": avg}
    for name, jcts in (("ours", ours), ("published", published(trace))):
        agree = xc.compare_jobs(jcts, theirs, submit)
        out[name] = {"avg_ratio": sum(jcts[j] for j in theirs) / len(theirs) / avg,
                     "end_within_1pct": agree["end_within_1pct"],
                     "jct_within_1pct": agree["jct_within_1pct"],
                     "worst": agree["worst"]}
    return out


def totals(rows: list[dict], who: str) -> dict[str, float]:
    """Shares over every job of ``rows`` (``who``: ``ours`` or ``published``)."""
    n = sum(r["jobs"] for r in rows)
    return {key: sum(r[who][key] * r["jobs"] for r in rows) / n
            for key in ("end_within_1pct", "jct_within_1pct")}


def report(rows: list[dict]) -> str:
    """The Markdown table of ``crosscheck.md``: per load, tuning and held-out workloads apart,
    then all of them."""
    groups: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["trace"].split("/")[0], not r["tuning"], r["trace"])):
        load = r["trace"].split("/")[0].removeprefix("workloads-")
        groups.setdefault(f"{load}, {'tuning' if r['tuning'] else 'held out'}", []).append(r)
    groups["all"] = rows
    lines = ["| workloads | jobs | ours: average ratio | ours: ends within 1% | "
             "ours: JCTs within 1% | published: average ratio | published: ends within 1% |",
             "|---|---|---|---|---|---|---|"]
    for name, chosen in groups.items():
        ours, pub = totals(chosen, "ours"), totals(chosen, "published")

        def span(who: str, chosen: list[dict] = chosen) -> str:
            lo = min(r[who]["avg_ratio"] for r in chosen)
            hi = max(r[who]["avg_ratio"] for r in chosen)
            return f"{lo:.3f}" if f"{lo:.3f}" == f"{hi:.3f}" else f"{lo:.3f}-{hi:.3f}"

        lines.append(f"| {name} ({len(chosen)}) | {sum(r['jobs'] for r in chosen):,} | "
                     f"{span('ours')} | {ours['end_within_1pct']:.1%} | "
                     f"{ours['jct_within_1pct']:.1%} | {span('published')} | "
                     f"{pub['end_within_1pct']:.1%} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=RUNS)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a policy option over the profile's (JSON value or string); "
                         "printed, not saved")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a field of the profile replaced, e.g. round_s=null; printed, not saved")
    ap.add_argument("--report-only", action="store_true",
                    help="print the Markdown table of the stored results and stop")
    args = ap.parse_args(argv)
    if args.report_only:
        print(report(json.loads(args.out.read_text())["workloads"]))
        return 0
    change = xc.Change(xc.parse_assignments(args.option), xc.parse_assignments(args.set))
    runs = stored_runs(args.runs)
    if not runs:
        print(f"no runs in {args.runs}", file=sys.stderr)
        return 2
    rows = []
    print("workload: ours / published against the artifact's code with our search: "
          "avg ratio, ends within 1%, JCTs within 1%")
    for run in sorted(runs.values(), key=lambda r: r["trace"]):
        theirs = {k: float(v) for k, v in run["jcts"].items()}
        row = compare(run["trace"], theirs, change)
        row["jobs"] = len(theirs)
        rows.append(row)
        o, p = row["ours"], row["published"]
        print(f"  {row['trace']:<26}{' (tuning)' if row['tuning'] else '':9} "
              f"ours {o['avg_ratio']:.3f} {o['end_within_1pct']:6.1%} {o['jct_within_1pct']:6.1%}"
              f" | published {p['avg_ratio']:.3f} {p['end_within_1pct']:6.1%} "
              f"{p['jct_within_1pct']:6.1%}", flush=True)
    summary = {}
    for part, chosen in (("tuning", [r for r in rows if r["tuning"]]),
                         ("held_out", [r for r in rows if not r["tuning"]]),
                         ("all", rows)):
        if chosen:
            summary[part] = {"jobs": sum(r["jobs"] for r in chosen),
                             "ours": totals(chosen, "ours"),
                             "published": totals(chosen, "published")}
            s = summary[part]
            print(f"{part}: {s['jobs']} jobs; ours {s['ours']['end_within_1pct']:.1%} of ends, "
                  f"{s['ours']['jct_within_1pct']:.1%} of JCTs within 1%; published "
                  f"{s['published']['end_within_1pct']:.1%}, "
                  f"{s['published']['jct_within_1pct']:.1%}")
    if change:
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"workloads": rows, "summary": summary}, indent=1,
                                   sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
