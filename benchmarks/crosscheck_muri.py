"""Cross-check our Muri baselines against the Muri artifact's own outputs, job by job.

Runs one policy on one Muri trace in the simulator under a profile (default ``muri-artifact``)
and compares with the artifact's numbers: the published average JCT (spec
``shared/specs/muri.md`` 4.5, Figures 9/10) and, where the artifact's per-job ``job.csv`` exists
(``shared/data/peer-results/muri/<trace>/<policy>.csv``), each job's completion time (job ids
are the trace's ``job_id`` column in both; times in s).

    python benchmarks/crosscheck_muri.py --trace trace3 --policy tiresias-3q
    python benchmarks/crosscheck_muri.py --trace trace3_pr --policy srtf -o running_first=1
    python benchmarks/crosscheck_muri.py --trace trace3 --policy srtf --profile default

Traces: the bundled ``trace1``, ``trace1_pr``, ``trace3``, ``trace4``; ``trace3_pr`` and
``trace4_pr`` (traces 3' and 4') are derived from trace3/trace4 by setting every submit time to
0, as the artifact's ``trace{1..4}_pr.csv`` are (spec 4.2; ``trace1_pr`` is bundled and equals
trace1 with all submits at 0). Prints one JSON line: ours, theirs, ratio, the share of jobs
whose completion time is within 1 % of the artifact's, and the worst jobs.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

PEER = Path("/work/shared/data/peer-results/muri")
#: Published average JCT (s), spec 4.5 Figures 9/10 (trace*_pr = trace n').
PUBLISHED = {
    "srtf": {"trace1": 1370603, "trace1_pr": 2303544, "trace3": 193082, "trace3_pr": 844395,
             "trace4": 581983, "trace4_pr": 1430856},
    "srsf": {"trace1": 980141, "trace1_pr": 1801860, "trace3": 185022, "trace3_pr": 798058,
             "trace4": 487167, "trace4_pr": 1218502},
    "tiresias-3q": {"trace1": 3330371, "trace1_pr": 6921683, "trace3": 347213,
                    "trace3_pr": 2213110, "trace4": 1319383, "trace4_pr": 2674023},
    "antman": {"trace1": 5476391, "trace1_pr": 9808251, "trace3": 305454, "trace3_pr": 2674393,
               "trace4": 2212463, "trace4_pr": 4676093},
    "themis": {"trace1": 1823179, "trace1_pr": 3314303, "trace3": 397059, "trace3_pr": 1502768,
               "trace4": 994971, "trace4_pr": 2271053},
}


def load_jobs(trace: str) -> list:
    """The trace's jobs; ``<name>_pr`` not bundled = ``<name>`` with every submit at 0."""
    from slurm_sched.errors import InputError
    from slurm_sched.traces import bundled, read_trace

    try:
        return read_trace(bundled(f"muri/{trace}.csv"))
    except InputError:
        if not trace.endswith("_pr"):
            raise
    jobs = read_trace(bundled(f"muri/{trace[:-3]}.csv"))
    return [j.model_copy(update={"submit_time_s": 0.0}) for j in jobs]


def peer_jobs(trace: str, policy: str, peer_dir: Path) -> dict[str, float] | None:
    """The artifact's completion time per job id, if its job.csv exists."""
    path = peer_dir / trace / f"{policy}.csv"
    if not path.exists():
        return None
    with path.open() as f:
        return {r["job_id"]: float(r["end_time"]) for r in csv.DictReader(f)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--policy", required=True)
    ap.add_argument("--profile", default="muri-artifact")
    ap.add_argument("-o", "--option", action="append", default=[], help="policy KEY=VALUE")
    ap.add_argument("--peer", default=str(PEER))
    ap.add_argument("--worst", type=int, default=5)
    ap.add_argument("--dump", help="write ours per job (job_id,start_time,end_time,"
                                   "preemptions) to this CSV")
    args = ap.parse_args()

    from slurm_sched.model import parse_cluster_spec
    from slurm_sched.policy import registry
    from slurm_sched.sim import profile as profiles
    from slurm_sched.sim.runner import simulate

    prof = profiles.get(args.profile)
    given: dict[str, object] = {}
    for kv in args.option:
        k, _, v = kv.partition("=")
        given[k] = json.loads(v) if v[:1] in "0123456789-[{tf" else v
    pol = registry.create(args.policy, prof.options_for(args.policy, given))
    jobs = load_jobs(args.trace)
    t0 = time.perf_counter()
    res = simulate(jobs, parse_cluster_spec(prof.cluster or "8x8"), pol, profile=prof)
    wall = time.perf_counter() - t0
    ours = {c.spec.job_id: c.finish_s for c in res.completed}
    sub = {c.spec.job_id: c.spec.submit_time_s for c in res.completed}
    avg = sum(ours[j] - sub[j] for j in ours) / len(ours)
    out: dict[str, object] = {
        "trace": args.trace, "policy": args.policy, "profile": args.profile,
        "options": prof.options_for(args.policy, given), "jobs": len(jobs),
        "completed": len(ours), "avg_jct_s": round(avg, 1),
        "makespan_s": round(max(ours.values()), 1), "preemptions": res.metrics.preemptions,
        "wall_s": round(wall, 1),
    }
    theirs = PUBLISHED.get(args.policy, {}).get(args.trace)
    if theirs:
        out["published_avg_jct_s"] = theirs
        out["ratio"] = round(avg / theirs, 4)
    peer = peer_jobs(args.trace, args.policy, Path(args.peer))
    if peer is not None:
        common = [j for j in ours if j in peer]
        within = [j for j in common if abs(ours[j] - peer[j]) <= 0.01 * peer[j]]
        out["peer_jobs"] = len(peer)
        out["within_1pct"] = round(len(within) / len(peer), 4)
        rel = sorted(common, key=lambda j: -abs(ours[j] - peer[j]) / max(peer[j], 1e-9))
        out["worst"] = [(j, round(ours[j]), round(peer[j])) for j in rel[:args.worst]]
    if args.dump:
        with open(args.dump, "w") as f:
            f.write("job_id,start_time,end_time,preemptions\n")
            for c in res.completed:
                f.write(f"{c.spec.job_id},{c.first_start_s},{c.finish_s},{c.preemptions}\n")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
