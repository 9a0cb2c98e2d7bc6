"""Benchmark: ``slurm-sched advise`` on a month of accounting of a 1,000-GPU site.

    python benchmarks/bench_advise.py                      # -> benchmarks/results/advise.json
    python benchmarks/bench_advise.py --jobs 20000 --days 3 --out /tmp/advise.json

The accounting is generated (no site's history is bundled): ``--jobs`` jobs drawn with
replacement (seed 0) from the Microsoft Philly job summary bundled with Pollux
(``data/pollux/philly.csv``: GPU count, run time and virtual cluster as the account), submitted
uniformly over ``--days`` days, with run times scaled so that the GPU-seconds asked for are
``--load`` of the cluster's (125 nodes x 8 GPUs) over the period; time limits are the run time
rounded up to 1 h, 4 h, 12 h, 1 d, 3 d or 7 d; observed starts follow the submit after an
exponential wait (mean 10 min). It is written as ``sacct -P`` text with the reader's columns.

Measured, in this process: reading the file (``read_sacct``), then the whole advice (every
default policy replayed, measured, validated and 200 day resamples), wall time each, plus the
peak resident memory of the process. Targets: under 10 minutes on 2 cores, under 4 GB.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from slurm_sched.advisor.cluster_shape import cluster_shape
from slurm_sched.advisor.pipeline import advise
from slurm_sched.advisor.replay import default_policies
from slurm_sched.traces import philly
from slurm_sched.traces.sacct import SACCT_COLUMNS, read_sacct

HERE = Path(__file__).resolve().parent
PHILLY = HERE.parent / "slurm_sched" / "data" / "pollux" / "philly.csv"
CLUSTER = "125x8"
GPUS = 1000
LIMITS_S = (3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)
START = datetime(2026, 1, 5, tzinfo=UTC).timestamp()
TARGET_S = 600.0
TARGET_RSS_GB = 4.0


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")  # local time, as sacct prints


def _limit(seconds: float) -> str:
    cap = next((x for x in LIMITS_S if x >= seconds), LIMITS_S[-1])
    return f"{cap // 86400}-{cap % 86400 // 3600:02d}:00:00"


def generate(path: Path, jobs: int, days: float, load: float, seed: int = 0) -> dict[str, float]:
    """Write the generated accounting to ``path``; returns what was generated."""
    source = philly.read(PHILLY)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(source), size=jobs)
    gpus = np.array([min(source[i].num_gpus, 64) for i in pick])
    run = np.array([source[i].duration_s for i in pick])
    span = days * 86400.0
    scale = load * GPUS * span / float((gpus * run).sum())
    run = np.maximum(1.0, np.minimum(run * scale, LIMITS_S[-1]))
    submit = np.sort(rng.uniform(0.0, span, size=jobs)) + START
    start = submit + rng.exponential(600.0, size=jobs)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh, delimiter="|", lineterminator="\n")
        out.writerow(SACCT_COLUMNS)
        for k, i in enumerate(pick):
            g, node_count = int(gpus[k]), max(1, -(-int(gpus[k]) // 8))
            tres = f"billing={g},cpu={4 * g},gres/gpu={g},mem={16 * g}G,node={node_count}"
            cells = {
                "JobID": str(k + 1), "JobIDRaw": str(k + 1), "User": f"u{i % 97}",
                "Account": source[i].user, "Partition": "gpu", "QOS": "normal",
                "State": "COMPLETED", "ExitCode": "0:0", "Submit": _iso(submit[k]),
                "Eligible": _iso(submit[k]), "Start": _iso(start[k]),
                "End": _iso(start[k] + run[k]), "Timelimit": _limit(run[k]),
                "AllocTRES": tres, "ReqTRES": tres,
                "NodeList": f"gpu[{1:03d}-{node_count:03d}]" if node_count > 1 else "gpu001",
                "Comment": "",
            }  # fmt: skip
            out.writerow([cells.get(c, "") for c in SACCT_COLUMNS])
    return {"jobs": jobs, "days": days, "load": load, "run_time_scale": scale}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200_000)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path("/tmp/slurm-sched-bench-advise.txt"))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "advise.json")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    made = generate(args.work, args.jobs, args.days, args.load)
    print(f"generated {args.jobs} jobs in {time.perf_counter() - t0:.1f} s -> {args.work}",
          file=sys.stderr)
    t0 = time.perf_counter()
    accounting = read_sacct(args.work)
    read_s = time.perf_counter() - t0
    print(f"read in {read_s:.1f} s", file=sys.stderr)
    shape = cluster_shape(spec=CLUSTER)
    policies = default_policies()
    replay_s: dict[str, float] = {}
    began = [time.perf_counter()]

    def on_replay(name: str, done: int, total: int) -> None:
        if done >= total:
            replay_s[name] = time.perf_counter() - began[0]
            print(f"  {name}: {replay_s[name]:.1f} s", file=sys.stderr)
            began[0] = time.perf_counter()

    t0 = time.perf_counter()
    began[0] = t0
    advice = advise(accounting, shape, policies=policies, baseline="slurm-backfill",
                    resamples=args.resamples, on_replay=on_replay)
    advise_s = time.perf_counter() - t0
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    total_s = read_s + advise_s
    result = {
        "benchmark": "advise",
        "input": {**made, "cluster": CLUSTER, "source": "philly.csv (Pollux), resampled"},
        "policies": policies,
        "read_s": round(read_s, 2),
        "replay_s": {k: round(v, 2) for k, v in replay_s.items()},
        "advise_s": round(advise_s, 2),
        "total_s": round(total_s, 2),
        "peak_rss_gb": round(rss_gb, 3),
        "target_s": TARGET_S,
        "target_rss_gb": TARGET_RSS_GB,
        "met": total_s <= TARGET_S and rss_gb <= TARGET_RSS_GB,
        "failed_policies": {n: r.error for n, r in advice.runs.items() if not r.ok},
        "recommendation": advice.recommendation.text,
        "machine": {"python": platform.python_version(), "cpus": _cpus()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    raise SystemExit(main())
