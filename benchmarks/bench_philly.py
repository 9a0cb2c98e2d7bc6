"""Benchmark: simulate the full Pollux Philly trace (82,247 jobs) on a 256x8-GPU cluster.

Run:
    python benchmarks/bench_philly.py [--policies fifo,tiresias] [--out results.json]

Each policy runs in a fresh subprocess so its peak RSS (ru_maxrss of that process) is its own.
Targets: Tiresias <= 60 s wall and <= 2 GB peak RSS on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

from slurm_sched.hostinfo import package_versions

CLUSTER = "256x8"
TRACE = "pollux/philly.csv"


def run_one(policy: str) -> dict:
    """Runs in the child process: load, simulate, measure."""
    from slurm_sched import traces
    from slurm_sched.model import parse_cluster_spec
    from slurm_sched.sim.runner import simulate

    t0 = time.perf_counter()
    jobs = traces.read_trace(traces.bundled(TRACE))
    t1 = time.perf_counter()
    res = simulate(jobs, parse_cluster_spec(CLUSTER), policy)
    t2 = time.perf_counter()
    return {
        "policy": policy,
        "jobs": len(jobs),
        "completed": res.metrics.jobs,
        "cycles": res.stats.cycles,
        "load_s": round(t1 - t0, 3),
        "simulate_s": round(t2 - t1, 3),
        "wall_s": round(t2 - t0, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "avg_jct_s": res.metrics.avg_jct_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="fifo,tiresias")
    ap.add_argument("--out", default="benchmarks/results/philly.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child)))
        return 0
    results = []
    for policy in args.policies.split(","):
        out = subprocess.run(
            [sys.executable, __file__, "--child", policy], check=True, capture_output=True,
            text=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{policy:10s} wall {r['wall_s']:6.1f} s  (load {r['load_s']:.1f} s)  "
              f"peak RSS {r['peak_rss_mb']:.0f} MB  {r['completed']}/{r['jobs']} jobs")
        results.append(r)
    doc = {
        "benchmark": "philly_full_trace",
        "trace": TRACE,
        "cluster": CLUSTER,
        "machine": {"python": platform.python_version(), "packages": package_versions(),
                    "cpus": _cpus(), "node": platform.node()},
        "targets": {"tiresias_wall_s": 60, "peak_rss_mb": 2048},
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())
