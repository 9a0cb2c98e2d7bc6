"""Our policies against Pollux's published simulator results, job by job.

Reference: ``shared/data/peer-results/pollux/<policy>-<load>.json`` (per-workload per-job JCTs
of the OSDI'21 artifact's simulator on ``workloads-<load>/workload-N.csv``, 16 x 4 GPUs). Job
ids are the workload's ``name`` column in both. Optimus has no policy here (not covered).

Usage::

    PYTHONPATH=$PWD python benchmarks/crosscheck_pollux.py --policy tiresias \\
        --loads 1.5 --workloads 1,2 [--profile pollux-artifact] [--tiresias-placement node-chunks]
        [--worst 10] [--json OUT]

Prints, per (load, workload): our average JCT, theirs, the ratio, the share of jobs within 1 %
of theirs and (``--worst``) the jobs furthest off.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path

from slurm_sched.model.cluster import parse_cluster_spec
from slurm_sched.policy import registry
from slurm_sched.policy.base import Policy
from slurm_sched.sim import profile as profiles
from slurm_sched.sim.runner import simulate
from slurm_sched.traces import pollux_workload

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "slurm_sched" / "data" / "pollux"
PEER = Path("/work/shared/data/peer-results/pollux")


def make_policy(name: str, tiresias_placement: str | None,
                options: dict | None = None) -> Policy:
    opts = dict(options or {})
    if name == "tiresias" and tiresias_placement:
        opts["placement"] = tiresias_placement
    return registry.create(name, opts)


def run_one(policy: str, load: str, wl: int, profile: str, tiresias_placement: str | None,
            peer: Path, overrides: dict | None = None, options: dict | None = None) -> dict:
    jobs = pollux_workload.read(DATA / f"workloads-{load}" / f"workload-{wl}.csv")
    prof = profiles.get(profile)
    if overrides:  # one-change diagnosis runs (--set FIELD=VALUE)
        prof = dataclasses.replace(prof, **overrides)
    cluster = parse_cluster_spec(prof.cluster or "16x4")
    t0 = time.monotonic()
    res = simulate(jobs, cluster, make_policy(policy, tiresias_placement, options), profile=prof)
    wall = time.monotonic() - t0
    ours = {c.spec.job_id: c.finish_s - c.spec.submit_time_s for c in res.completed}
    theirs = json.loads((peer / f"{policy}-{load}.json").read_text())["jcts"][f"workload-{wl}"]
    missing = sorted(set(theirs) - set(ours))
    within = sum(1 for k, v in theirs.items() if k in ours and abs(ours[k] - v) <= 0.01 * v)
    worst = sorted(((k, ours.get(k, float("nan")), v) for k, v in theirs.items()),
                   key=lambda r: -abs(r[1] - r[2]) / r[2] if r[0] in ours else float("-inf"))
    a, b = statistics.mean(ours.values()), statistics.mean(theirs.values())
    return {"policy": policy, "load": load, "workload": wl, "profile": profile,
            "ours": a, "theirs": b, "ratio": a / b, "within_1pct": within, "jobs": len(theirs),
            "missing": missing, "wall_s": wall, "worst": worst, "per_job": ours}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", required=True, choices=["tiresias", "pollux"])
    ap.add_argument("--loads", default="1.5")
    ap.add_argument("--workloads", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--profile", default="pollux-artifact")
    ap.add_argument("--tiresias-placement", default=None, choices=["spread", "node-chunks"])
    ap.add_argument("--peer", type=Path, default=PEER)
    ap.add_argument("--worst", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                    help="a policy option (string value), e.g. throughput=measured")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a numeric profile field (diagnosis)")
    args = ap.parse_args()
    overrides = {k: float(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    options = dict(kv.split("=", 1) for kv in args.option)
    rows = []
    for load in args.loads.split(","):
        for wl in (int(w) for w in args.workloads.split(",")):
            r = run_one(args.policy, load, wl, args.profile, args.tiresias_placement, args.peer,
                        overrides, options)
            rows.append(r)
            print(f"{r['policy']} load {load} workload-{wl} [{args.profile}]: ours "
                  f"{r['ours']:.1f} s theirs {r['theirs']:.1f} s ratio {r['ratio']:.4f} "
                  f"within 1% {r['within_1pct']}/{r['jobs']} missing {len(r['missing'])} "
                  f"({r['wall_s']:.1f} s)", flush=True)
            for k, o, t in r["worst"][:args.worst]:
                print(f"    {k:18s} ours {o:10.1f} theirs {t:8d} ({(o - t) / t:+.1%})")
    if len(rows) > 1:
        within = sum(r["within_1pct"] for r in rows)
        jobs = sum(r["jobs"] for r in rows)
        print(f"all: max |ratio-1| {max(abs(r['ratio'] - 1) for r in rows):.4f}, "
              f"within 1% {within}/{jobs} ({within / jobs:.1%})")
    if args.json:
        for r in rows:
            r["worst"] = r["worst"][:20]
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
