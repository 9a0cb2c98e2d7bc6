"""Compare one simulated Muri-comparison run with the Muri artifact's per-job output.

    python benchmarks/muri_perjob.py --trace trace3 --policy muri-s \
        --peer /work/shared/data/peer-results/muri/trace3/muri-s-noautopack.csv \
        [-o autopack=false] [--save runs/x.json] [--load runs/x.json]

Runs ``policy`` on the bundled ``muri/<trace>.csv`` (8x8 GPUs, world ``muri``, restart overhead
10 s per (re)start unless ``--overhead``), then prints: both average JCTs and their ratio, the
share of jobs whose completion time is within 1 % (and 0.1 %) of the artifact's, the first
jobs (by the artifact's start time) whose start or end differ, and the worst jobs. The
artifact's ``job.csv`` is in seconds (``end_time``, ``start_time`` = first start); job ids are
the trace's ``job_id`` column in both.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path


def load_peer(path: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            out[row["job_id"]] = {k: float(v) for k, v in row.items() if k != "job_id"}
    return out


def run(trace: str, policy: str, options: dict[str, object], overhead: float,
        profile: str | None = None) -> dict:
    from slurm_sched.model import parse_cluster_spec
    from slurm_sched.policy import registry
    from slurm_sched.sim.runner import simulate
    from slurm_sched.traces import bundled, read_trace

    jobs = read_trace(trace if trace.endswith(".csv") else bundled(f"muri/{trace}.csv"))
    pol = registry.create(policy, options or None)
    t0 = time.perf_counter()
    if profile:  # the profile's world and overheads
        res = simulate(jobs, parse_cluster_spec("8x8"), pol, profile=profile)
    else:
        res = simulate(jobs, parse_cluster_spec("8x8"), pol, restart_overhead_s=overhead,
                       progress_model="muri")
    return {
        "wall_s": time.perf_counter() - t0,
        "preemptions": res.metrics.preemptions,
        "jobs": {c.spec.job_id: {"submit": c.spec.submit_time_s, "start": c.first_start_s,
                                 "end": c.finish_s, "executed": c.executed_s,
                                 "preempt": c.preemptions, "gpus": c.spec.num_gpus,
                                 "model": c.spec.model}
                 for c in res.completed},
    }


def compare(ours: dict, peer: dict[str, dict[str, float]], show: int = 15) -> dict:
    ids = sorted(peer, key=lambda j: (peer[j]["start_time"], int(j)))
    mine = ours["jobs"]
    jct_o = [mine[j]["end"] - mine[j]["submit"] for j in ids]
    jct_p = [peer[j]["JCT"] for j in ids]
    avg_o, avg_p = sum(jct_o) / len(ids), sum(jct_p) / len(ids)

    def within(tol: float) -> float:
        return sum(abs(mine[j]["end"] - peer[j]["end_time"])
                   <= tol * max(peer[j]["end_time"], 1.0) for j in ids) / len(ids)

    def jct_within(tol: float) -> float:
        return sum(abs(o - p) <= tol * max(p, 1.0)
                   for o, p in zip(jct_o, jct_p, strict=True)) / len(ids)

    out = {"avg_ours": avg_o, "avg_peer": avg_p, "ratio": avg_o / avg_p,
           "end_within_1pct": within(0.01), "end_within_0.1pct": within(0.001),
           "jct_within_1pct": jct_within(0.01), "jct_within_5pct": jct_within(0.05),
           "preemptions_ours": ours.get("preemptions"),
           "preemptions_peer": sum(peer[j]["preempt"] for j in ids)}
    print(json.dumps(out, indent=1))
    print("first differing jobs (artifact start order): id gpus model | submit | "
          "start ours/peer | end ours/peer | preempt ours/peer")
    n = 0
    for j in ids:
        o, p = mine[j], peer[j]
        if abs(o["start"] - p["start_time"]) > 1.0 or abs(o["end"] - p["end_time"]) > (
            0.001 * max(p["end_time"], 1.0)
        ):
            print(f"{j:>4} {o['gpus']:>2} {o['model']!s:>18} | {p['submit_time']:>10.0f} | "
                  f"{o['start']:>10.0f} / {p['start_time']:>10.0f} | {o['end']:>10.0f} / "
                  f"{p['end_time']:>10.0f} | {o['preempt']} / {p['preempt']:.0f}")
            n += 1
            if n >= show:
                break
    worst = sorted(ids, key=lambda j: -abs((mine[j]["end"] - mine[j]["submit"]) - peer[j]["JCT"]))
    print("worst |JCT diff|: id gpus model | JCT ours / peer")
    for j in worst[:show]:
        o = mine[j]
        print(f"{j:>4} {o['gpus']:>2} {o['model']!s:>18} | {o['end'] - o['submit']:>10.0f} / "
              f"{peer[j]['JCT']:>10.0f}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="trace3",
                    help="a bundled muri trace name (trace3) or a .csv path")
    ap.add_argument("--policy", default="muri-s")
    ap.add_argument("--peer", help="the artifact's job.csv (omit: only our average JCT)")
    ap.add_argument("-o", "--option", action="append", default=[], help="KEY=JSON")
    ap.add_argument("--overhead", type=float, default=10.0)
    ap.add_argument("--profile", help="a simulation profile (e.g. muri-artifact) instead of "
                    "world muri + --overhead")
    ap.add_argument("--save")
    ap.add_argument("--load")
    ap.add_argument("--show", type=int, default=15)
    args = ap.parse_args()
    if args.load:
        ours = json.loads(Path(args.load).read_text())
    else:
        opts: dict[str, object] = {}
        for kv in args.option:
            k, _, v = kv.partition("=")
            try:
                opts[k] = json.loads(v)
            except json.JSONDecodeError:
                opts[k] = v
        ours = run(args.trace, args.policy, opts, args.overhead, args.profile)
        print(f"simulated in {ours['wall_s']:.0f} s")
        if args.save:
            Path(args.save).parent.mkdir(parents=True, exist_ok=True)
            Path(args.save).write_text(json.dumps(ours))
    if args.peer:
        compare(ours, load_peer(args.peer), args.show)
    else:
        jct = [j["end"] - j["submit"] for j in ours["jobs"].values()]
        print(json.dumps({"avg_ours": sum(jct) / len(jct), "jobs": len(jct),
                          "makespan": max(j["end"] for j in ours["jobs"].values()),
                          "preemptions_ours": ours.get("preemptions")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
