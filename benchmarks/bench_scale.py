"""Scale benchmark: one ``decide()`` of every registered policy on a big snapshot.

Run:
    python benchmarks/bench_scale.py [--nodes 1024] [--pending 10000] [--running 4000]
        [--repeats 5] [--policies a,b] [--budget-s 60] [--seed 0]
        [--out benchmarks/results/scale.json]
    python benchmarks/bench_scale.py --table benchmarks/results/scale.json   # docs/benchmarks.md

The snapshot (seeded, built once):

- **Cluster.** ``--nodes`` servers of 8 GPUs, half ``a100``, half ``v100`` (1,024 nodes = 8,192
  GPUs).
- **GPU counts** 1/2/4/8/16/32 drawn with the frequencies of the bundled Philly trace
  (``data/pollux/philly.csv``, 82,247 jobs; the few 12/24/64/128-GPU jobs left out):
  :data:`PHILLY_GPU_COUNTS`. Users: the trace's 11 largest virtual clusters, weighted by their
  job counts, plus tickets per user (Gandiva_fair). 5% of the jobs require a GPU type.
- **Hints of every policy family** on every job: a Muri stage profile and iteration time for
  its GPU count (``data/muri/trace1.csv``; AntMan's ``priority`` class too), an A-SRPT
  configuration of the synthetic table with the job's GPU count and a recurring group, a
  Pollux application and batch size drawn from the Pollux realistic workloads (SJF-BSBF,
  SJF-FFS, Pollux), ``tickets``, ``iterations``. 40% of the jobs name a Rubick model
  (``vit``, ``roberta``, ``bert``, ``t5``, ``gpt2``, ``llama7b``; a third of them guaranteed),
  the others a Muri model name (which Gandiva_fair maps to its job types).
- **State.** ``--running`` jobs run exclusively, consolidated (``pack_consolidated``), on their
  type if they need one, with default settings, having done a random part of their work at rate
  1; ``--pending`` jobs wait. Submit times: running jobs in the first 20 hours, pending jobs in
  the 4 hours before ``now`` = 24 h.

Each timed call gets a *new* snapshot object over the same jobs, with the free-GPU map and the
pending list filled in as both backends do (``known_free_gpus``, ``known_pending``), so no
policy inherits another's cached occupancy. Per policy and repeat: a fresh policy object,
``first`` = its first ``decide()`` (cold: every learned structure is built), ``steady`` = a
second ``decide()`` of the same object on a new snapshot of the same state (the usual
steady-state cycle, where per-job state learned at arrival is reused). Repeats stop early when
a policy has used ``--budget-s`` (at least one repeat always runs). Progress goes to stderr; the
JSON (``benchmarks/results/scale.json``) holds machine facts, the load average before and after
each policy, the command, and per policy the median and max wall time of both calls, their
median CPU time (the machine is shared: CPU time shows what the policy itself used), the
number of actions and the machine's speed just before (:func:`calibrate`), and which hot modules
ran compiled (:mod:`slurm_sched.native`: the build ``scripts/setup.sh`` makes; set
``SLURM_SCHED_NATIVE=off`` to time the pure-Python modules). Target: median wall time <= 1 s on
the reference 2-core machine. The first policy of a family in the process also
pays one-time loading of its model data (caches of the perf modules), as a freshly started
scheduler would.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slurm_sched import native
from slurm_sched.hostinfo import cpu_model, package_versions
from slurm_sched.model import (
    Cluster,
    ClusterSnapshot,
    JobSpec,
    JobState,
    JobView,
    parse_cluster_spec,
)
from slurm_sched.perf.asrpt_model import synthetic_profiles
from slurm_sched.policy import registry
from slurm_sched.policy.placement import FreeMap, pack_consolidated
from slurm_sched.traces import bundled, read_trace

TARGET_S = 1.0
GPUS_PER_NODE = 8
GPU_TYPES = ("a100", "v100")

#: Jobs per GPU count in the bundled Philly trace (data/pollux/philly.csv).
PHILLY_GPU_COUNTS: dict[int, int] = {1: 76627, 2: 1818, 4: 1870, 8: 1643, 16: 199, 32: 67}
#: The Philly trace's largest virtual clusters and their job counts (users of the snapshot).
PHILLY_USERS: dict[str, int] = {
    "6214e9": 41226, "11cb48": 16091, "6c71a0": 9953, "b436b2": 7423, "103959": 1934,
    "ee9e8c": 1511, "0e4a51": 1435, "ed69ec": 1137, "7f04ca": 723, "2869ce": 422, "e13805": 374,
}
RUBICK_MODELS = ("vit", "roberta", "bert", "t5", "gpt2", "llama7b")
RUBICK_SHARE = 0.4
TYPED_SHARE = 0.05
NOW_S = 24 * 3600.0


def _muri_profiles() -> dict[str, dict[int, tuple[tuple[float, ...], float]]]:
    """Muri model -> GPU count -> (stage times ms, iteration time ms) from trace1."""
    out: dict[str, dict[int, tuple[tuple[float, ...], float]]] = {}
    for j in read_trace(bundled("muri/trace1.csv")):
        if j.model and j.stage_times_ms:
            it = float(j.attrs.get("iteration_time_ms") or sum(j.stage_times_ms))
            out.setdefault(j.model, {})[j.num_gpus] = (j.stage_times_ms, it)
    return out


def _pollux_apps() -> list[tuple[str, int]]:
    """(application, global batch size) of every job of the Pollux realistic workloads."""
    rows: list[tuple[str, int]] = []
    for k in range(1, 9):
        path = bundled(f"pollux/workloads-realistic/workload-{k}.csv")
        with open(path, newline="") as f:
            rows.extend((r["application"], int(r["batch_size"])) for r in csv.DictReader(f))
    return rows


def _nearest(options: list[int], want: int) -> int:
    return min(options, key=lambda c: (abs(math.log(c / want)), c))


def build_jobs(num_pending: int, num_running: int, cluster: Cluster,
               seed: int) -> list[JobView]:
    """The jobs of the snapshot (see the module docstring), in submission order."""
    rng = random.Random(seed)
    muri = _muri_profiles()
    muri_models = sorted(muri)
    apps = _pollux_apps()
    asrpt_by_gpus: dict[int, list[str]] = {}
    for name, p in synthetic_profiles().items():
        asrpt_by_gpus.setdefault(p.num_gpus, []).append(name)
    for names in asrpt_by_gpus.values():
        names.sort()
    counts, weights = zip(*PHILLY_GPU_COUNTS.items(), strict=True)
    users, user_w = zip(*PHILLY_USERS.items(), strict=True)
    tickets = {u: rng.choice((1, 2, 4)) for u in users}

    def spec(i: int, submit_s: float) -> JobSpec:
        g = rng.choices(counts, weights)[0]
        user = rng.choices(users, user_w)[0]
        mm = rng.choice(muri_models)
        stages, it_ms = muri[mm][_nearest(sorted(muri[mm]), g)]
        duration = math.exp(rng.uniform(math.log(600.0), math.log(3 * 86400.0)))
        iters = max(1, round(duration * 1000.0 / it_ms))
        app, batch = rng.choice(apps)
        attrs: dict[str, Any] = {
            "iteration_time_ms": it_ms, "priority": rng.randint(0, 1),
            "tickets": tickets[user], "application": app,
            "group": f"{user}|{mm}|{g}|b{int(math.log2(duration))}",
        }
        if g in asrpt_by_gpus:
            attrs["asrpt_profile"] = rng.choice(asrpt_by_gpus[g])
        model: str = mm
        batch_size: int | None = batch
        if rng.random() < RUBICK_SHARE:
            model = rng.choice(RUBICK_MODELS)
            batch_size = None  # the model's own global batch (Rubick's tables)
            attrs["guaranteed"] = rng.random() < 1 / 3
        gpu_type = rng.choice(GPU_TYPES) if rng.random() < TYPED_SHARE else None
        return JobSpec(
            job_id=f"j{i:06d}", submit_time_s=round(submit_s, 3), num_gpus=g,
            duration_s=iters * it_ms / 1000.0, user=user, model=model, batch_size=batch_size,
            iterations=iters, gpu_type=gpu_type, stage_times_ms=stages, attrs=attrs,
        )

    free: FreeMap = {n.name: list(range(n.num_gpus)) for n in cluster.nodes}
    by_type: dict[str, FreeMap] = {
        t: {n.name: free[n.name] for n in cluster.nodes if n.gpu_type == t} for t in GPU_TYPES
    }
    jobs: list[JobView] = []
    i = 0
    placed = 0
    while placed < num_running:
        s = spec(i, rng.uniform(0.0, 20 * 3600.0))
        i += 1
        place = pack_consolidated(free if s.gpu_type is None else by_type[s.gpu_type],
                                  s.num_gpus)
        if place is None:  # the cluster is full for this size: draw another job
            continue
        placed += 1
        started = rng.uniform(s.submit_time_s, NOW_S - 60.0)
        executed = NOW_S - started
        done = min(s.duration_s * 0.95, executed)
        jobs.append(JobView(
            spec=s, state=JobState.RUNNING, placement=place, first_start_s=started,
            accounted_at_s=NOW_S, executed_s=executed, work_done_s=done, rate=1.0,
        ))
    for _ in range(num_pending):
        jobs.append(JobView(spec=spec(i, rng.uniform(20 * 3600.0, NOW_S))))
        i += 1
    jobs.sort(key=lambda j: (j.spec.submit_time_s, j.job_id))
    return jobs


def snapshot_factory(cluster: Cluster, jobs: list[JobView]) -> Callable[[], ClusterSnapshot]:
    """New snapshot objects of one state, carrying what the backends hand over."""
    frozen = tuple(jobs)
    used: dict[str, set[int]] = {}
    for j in frozen:
        if j.placement is not None and j.state is not JobState.PENDING:
            for node, g in j.placement.slots():
                used.setdefault(node, set()).add(g)
    free = {n.name: tuple(g for g in range(n.num_gpus) if g not in used.get(n.name, ()))
            for n in cluster.nodes}
    pending = tuple(j for j in frozen if j.state is JobState.PENDING)

    def make() -> ClusterSnapshot:
        return ClusterSnapshot(now_s=NOW_S, cluster=cluster, jobs=frozen,
                               known_free_gpus=dict(free), known_pending=pending)

    return make


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def calibrate(repeats: int = 5) -> float:
    """CPU seconds of a fixed pure-Python workload (dicts, tuples, sorting: what the policies
    spend their time on), the median of ``repeats``. The reference VM's speed moves by a third
    and more, from one minute to the next, while the load average stays flat; a row's number
    says how fast the machine was when that policy was measured."""
    times = []
    for _ in range(repeats):
        c0 = time.process_time()
        rng = random.Random(1)
        table: dict[tuple[int, int], float] = {}
        for i in range(200_000):
            key = (i % 1024, rng.randrange(8))
            table[key] = table.get(key, 0.0) + i * 0.5
        sorted(table.items(), key=lambda kv: (-kv[1], kv[0]))
        times.append(time.process_time() - c0)
    return round(statistics.median(times), 4)


def _timed(pol: Any, snap: ClusterSnapshot) -> tuple[float, float, int]:
    """Wall and CPU seconds of one decide(), and its number of actions."""
    c0, t0 = time.process_time(), time.perf_counter()
    acts = pol.decide(snap, snap.now_s)
    return time.perf_counter() - t0, time.process_time() - c0, len(acts)


def measure(name: str, make: Callable[[], ClusterSnapshot], repeats: int,
            budget_s: float) -> dict[str, Any]:
    first: list[float] = []
    steady: list[float] = []
    first_cpu: list[float] = []
    steady_cpu: list[float] = []
    actions_first = actions_steady = 0
    load_before = _load()
    calibration = calibrate()
    spent = 0.0
    for _ in range(repeats):
        pol = registry.create(name)
        wall, cpu, actions_first = _timed(pol, make())
        first.append(wall)
        first_cpu.append(cpu)
        wall2, cpu2, actions_steady = _timed(pol, make())
        steady.append(wall2)
        steady_cpu.append(cpu2)
        spent += wall + wall2
        if spent >= budget_s:
            break
    row = {
        "policy": name,
        "repeats": len(first),
        "first_s_median": round(statistics.median(first), 4),
        "first_s_max": round(max(first), 4),
        "steady_s_median": round(statistics.median(steady), 4),
        "steady_s_max": round(max(steady), 4),
        # CPU time of the process: what the policy itself used, whatever else ran
        "first_cpu_s_median": round(statistics.median(first_cpu), 4),
        "steady_cpu_s_median": round(statistics.median(steady_cpu), 4),
        "actions_first": actions_first,
        "actions_steady": actions_steady,
        "load_avg_1m_before": load_before,
        "load_avg_1m_after": _load(),
        # the machine's speed just before (see calibrate(); lower is faster)
        "calibration_s": calibration,
    }
    row["meets_target"] = max(row["first_s_median"], row["steady_s_median"]) <= TARGET_S
    return row


def markdown_table(result: dict[str, Any]) -> str:
    """docs/benchmarks.md's table of a results JSON: per policy the median (max) wall seconds of
    the first and the steady ``decide()``, the median CPU seconds, the actions, and the verdict."""
    lines = [
        "| policy | first decide, s median (max) | steady decide, s median (max) | CPU s "
        "first / steady | actions | calibration s | <= 1 s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["results"]:
        lines.append(
            f"| {r['policy']} | {r['first_s_median']:.2f} ({r['first_s_max']:.2f}) "
            f"| {r['steady_s_median']:.2f} ({r['steady_s_max']:.2f}) "
            f"| {r['first_cpu_s_median']:.2f} / {r['steady_cpu_s_median']:.2f} "
            f"| {r['actions_first']} | {r.get('calibration_s', float('nan')):.3f} "
            f"| {'yes' if r['meets_target'] else '**no**'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", metavar="JSON",
                    help="print the markdown table of a results file and exit")
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--running", type=int, default=4_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--policies", default="", help="comma-separated names (default: all)")
    ap.add_argument("--budget-s", type=float, default=60.0,
                    help="stop repeating a policy once its calls took this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/scale.json")
    args = ap.parse_args(argv)
    if args.table:
        print(markdown_table(json.loads(Path(args.table).read_text())))
        return 0
    if args.nodes < 2 or args.nodes % 2:
        ap.error(f"--nodes must be an even number >= 2, got {args.nodes}")
    half = args.nodes // 2
    cluster = parse_cluster_spec(f"{half}x{GPUS_PER_NODE}:a100,{half}x{GPUS_PER_NODE}:v100")
    names = [n.strip() for n in args.policies.split(",") if n.strip()] or registry.names()
    load_at_start = _load()
    t0 = time.perf_counter()
    jobs = build_jobs(args.pending, args.running, cluster, args.seed)
    make = snapshot_factory(cluster, jobs)
    snap = make()
    used = cluster.total_gpus - snap.num_free_gpus
    print(f"snapshot: {len(jobs)} jobs, {used}/{cluster.total_gpus} GPUs busy, "
          f"built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows = []
    for name in names:
        print(f"{name} ...", end="", file=sys.stderr, flush=True)
        row = measure(name, make, args.repeats, args.budget_s)
        rows.append(row)
        print(f" first {row['first_s_median']:.3f} s (max {row['first_s_max']:.3f}), steady "
              f"{row['steady_s_median']:.3f} s (max {row['steady_s_max']:.3f}), "
              f"{row['actions_first']} actions", file=sys.stderr, flush=True)
    out = {
        "benchmark": "one decide() per registered policy on a synthetic big snapshot",
        "command": " ".join(["python", "benchmarks/bench_scale.py", *sys.argv[1:]])
        if argv is None else " ".join(["bench_scale", *argv]),
        "nodes": args.nodes,
        "gpus": cluster.total_gpus,
        "gpus_busy": used,
        "pending_jobs": len(snap.pending),
        "running_jobs": len(snap.running),
        "seed": args.seed,
        "repeats": args.repeats,
        "target_s": TARGET_S,
        "meets_target": [r["policy"] for r in rows if r["meets_target"]],
        "misses_target": [r["policy"] for r in rows if not r["meets_target"]],
        "machine": {
            "python": platform.python_version(), "python_executable": sys.executable,
            "packages": package_versions(),
            # which hot modules ran compiled (slurm_sched.native; a setup builds them)
            "compiled_core": native.status(),
            "python_base": sys.base_prefix,  # whose build: e.g. /usr (Debian's) or a pyenv one
            "processor": cpu_model() or platform.processor(),
            "machine": platform.machine(), "system": platform.system(),
            "cpus": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)),
            "load_avg_1m_at_start": load_at_start, "load_avg_1m_at_end": _load(),
        },
        "results": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}; misses target: {out['misses_target'] or 'none'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
