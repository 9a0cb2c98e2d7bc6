"""Reproduce the SJF-BSBF paper's simulation results (Tables III/IV, Fig. 6a/6b) in our world.

Every experiment runs on the 16x4 cluster in the ``sjf-bsbf`` progress model
(:mod:`slurm_sched.perf.sjf_bsbf_model`), writes JSON to
``benchmarks/results/sjf_bsbf_<experiment>.json`` and prints markdown tables. Commands::

    B="python benchmarks/repro_sjf_bsbf.py"
    $B tables --family pollux                  # Table III on Pollux's workloads-1.5
    $B tables --family pollux-2.0              # Pollux's heaviest workloads (320 jobs)
    $B tables --family calibrated --jobs 240   # Table III, calibrated workloads
    $B tables --family calibrated --jobs 480   # Table IV
    $B tables --family calibrated --variant analogues --policies sjf,tiresias,sjf-ffs,sjf-bsbf
    $B tables --family calibrated --variant no-memory --policies sjf,tiresias,sjf-ffs,sjf-bsbf
    $B tables --family calibrated --variant packed --policies sjf,tiresias,sjf-ffs,sjf-bsbf
    $B xi-sweep [--no-memory]                  # Fig. 6b
    $B tables --jobs 240 --ffs-sub-batch full --policies sjf,tiresias,sjf-ffs,sjf-bsbf
    $B tables --jobs 480 --ffs-sub-batch full --policies sjf,tiresias,sjf-ffs,sjf-bsbf
    $B xi-sweep --ffs-sub-batch full           # Fig. 6b, FFS without gradient accumulation
    $B load-sweep --seeds 4                    # Fig. 6a
    $B pollux-search                           # greedy vs exhaustive allocation search
    $B sharing-stats                           # why jobs wait under SJF-BSBF
    $B workloads                               # calibration of the generator
    $B fit                                     # eq. (7) fit quality
    $B report                                  # print every saved table

``--seeds N`` (default 8) sets how many workloads (seeds 1..N, or Pollux files 1..N) are run.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from slurm_sched.hostinfo import package_versions
from slurm_sched.model import JobSpec, parse_cluster_spec
from slurm_sched.perf.progress import ProgressModel
from slurm_sched.perf.sjf_bsbf_model import (
    GAVEL_ANALOGUES,
    GPU_MEMORY_GB,
    SWEEP_XI,
    GavelXi,
    UniformXi,
    fit_report,
    job_profile,
)
from slurm_sched.perf.sjf_bsbf_world import SjfBsbfWorld
from slurm_sched.policy.base import Policy
from slurm_sched.policy.fifo import Fifo
from slurm_sched.policy.pollux import Pollux, _Job, exhaustive_counts, greedy_counts, objective
from slurm_sched.policy.sjf import Sjf
from slurm_sched.policy.sjf_bsbf import SjfBsbf
from slurm_sched.policy.sjf_ffs import FfsSubBatch, SjfFfs
from slurm_sched.policy.tiresias import Tiresias
from slurm_sched.sim.runner import simulate
from slurm_sched.traces import read_trace
from slurm_sched.traces.pollux_workload import default_models_dir
from slurm_sched.workloads.sjf_bsbf import generate_jobs, summary

RESULTS = Path(__file__).resolve().parent / "results"
CLUSTER = "16x4"
POLICIES: dict[str, Callable[[], Policy]] = {
    "fifo": Fifo, "sjf": Sjf, "tiresias": Tiresias, "pollux": Pollux,
    "sjf-ffs": SjfFfs, "sjf-bsbf": SjfBsbf,
}
NON_ELASTIC = ("fifo", "sjf", "tiresias", "sjf-ffs", "sjf-bsbf")
LOADS = (120, 180, 240, 360, 480)

# The paper's numbers (hours; spec 4.4), for the side-by-side tables: avg JCT all / large /
# small, avg queueing all / large / small (Table IV's FIFO queueing row is a known defect).
PaperRow = tuple[float | None, ...]
PAPER: dict[int, dict[str, PaperRow]] = {
    240: {"fifo": (2.34, 3.92, 2.13, 1.65, 2.17, 1.58), "sjf": (1.25, 3.50, 0.94, 0.56, 1.76, 0.39),
          "tiresias": (1.51, 3.48, 1.23, 0.81, 1.73, 0.68),
          "pollux": (1.04, 1.96, 0.91, 1.00, 1.21, 0.97),
          "sjf-ffs": (1.23, 4.29, 0.81, 0.18, 0.98, 0.07),
          "sjf-bsbf": (1.01, 3.38, 0.68, 0.14, 0.89, 0.03)},
    480: {"fifo": (7.52, 10.06, 7.08, None, None, None),
          "sjf": (2.55, 7.00, 1.90, 1.87, 5.35, 1.35),
          "tiresias": (5.09, 8.25, 4.59, 4.41, 6.60, 4.04),
          "pollux": (4.69, 6.03, 4.51, 4.41, 5.03, 4.31),
          "sjf-ffs": (1.89, 8.12, 0.99, 0.73, 4.06, 0.21),
          "sjf-bsbf": (1.57, 6.13, 0.88, 0.69, 3.62, 0.21)},
}


# ------------------------------------------------------------------------ running
def workload(family: str, jobs: int, seed: int) -> list[JobSpec]:
    if family == "calibrated":
        return generate_jobs(jobs, seed)
    level = {"pollux": "1.5", "pollux-2.0": "2.0"}[family]
    path = default_models_dir().parent / f"workloads-{level}" / f"workload-{seed}.csv"
    return read_trace(path)


def run(jobs: Sequence[JobSpec], policy: Policy, world: ProgressModel) -> dict[str, Any]:
    t0 = time.perf_counter()
    res = simulate(jobs, parse_cluster_spec(CLUSTER), policy, progress_model=world)
    wall = time.perf_counter() - t0
    done = res.completed
    large = [c for c in done if c.spec.num_gpus > 4]
    small = [c for c in done if c.spec.num_gpus <= 4]

    def mean_h(xs: Sequence[float]) -> float:
        return statistics.fmean(xs) / 3600.0 if xs else 0.0

    return {
        "jobs": len(done),
        "avg_jct_h": mean_h([c.jct_s for c in done]),
        "avg_jct_large_h": mean_h([c.jct_s for c in large]),
        "avg_jct_small_h": mean_h([c.jct_s for c in small]),
        "avg_queue_h": mean_h([c.queue_s for c in done]),
        "avg_queue_large_h": mean_h([c.queue_s for c in large]),
        "avg_queue_small_h": mean_h([c.queue_s for c in small]),
        "makespan_h": res.metrics.makespan_s / 3600.0,
        "preemptions": res.metrics.preemptions,
        "shares": res.stats.by_kind.get("share", 0),
        "reconfigures": res.stats.by_kind.get("reconfigure", 0),
        "failed_actions": res.stats.actions_failed,
        "wall_s": round(wall, 2),
    }


def save(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"experiment": name, "cluster": CLUSTER,
               "machine": {"python": platform.python_version(),
                           "packages": package_versions()}, **payload}
    path = RESULTS / f"sjf_bsbf_{name}.json"
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"sjf_bsbf_{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _agg(values: Sequence[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0}


# ------------------------------------------------------------------------ experiments
VARIANTS = ("default", "analogues", "no-memory", "packed")


class PackedWorld(SjfBsbfWorld):
    """Diagnostic world: every placement runs as if packed (no multi-node penalty)."""

    def plan_speed(self, job: Any, placement: Any) -> float:
        prof = job_profile(job.spec)
        if prof is None:
            return 1.0
        if placement.num_gpus != prof.num_gpus:
            return super().plan_speed(job, placement)  # elastic (Pollux): unchanged
        return prof.ref_time_s / prof.t_iter(job.settings.sub_batch_size or prof.solo_b)


def make_world(variant: str) -> SjfBsbfWorld:
    if variant == "packed":
        return PackedWorld(make_interference(variant))
    return SjfBsbfWorld(make_interference(variant))


def make_policy(name: str, variant: str,
                ffs_sub_batch: FfsSubBatch = "largest-fitting") -> Policy:
    """A policy of the comparison; the sharing policies follow the world's variant, and
    SJF-FFS takes the sub-batch reading ``ffs_sub_batch``."""
    if name == "sjf-ffs":
        if variant == "analogues":
            return SjfFfs(make_interference(variant), sub_batch=ffs_sub_batch)
        if variant == "no-memory":
            return SjfFfs(memory_gb=None, sub_batch=ffs_sub_batch)
        return SjfFfs(sub_batch=ffs_sub_batch)
    if name == "sjf-bsbf" and variant in ("analogues", "no-memory"):
        if variant == "analogues":
            return SjfBsbf(make_interference(variant))
        return SjfBsbf(memory_gb=None)
    return POLICIES[name]()


def make_interference(variant: str) -> GavelXi:
    if variant == "analogues":
        return GavelXi(app_map=tuple(GAVEL_ANALOGUES.items()))
    return GavelXi()


def tables(family: str, jobs: int, seeds: int, policies: Sequence[str],
           variant: str = "default",
           ffs_sub_batch: FfsSubBatch = "largest-fitting") -> dict[str, Any]:
    per_seed: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    calib = []
    for seed in range(1, seeds + 1):
        specs = workload(family, jobs, seed)
        calib.append(summary(specs))
        for p in policies:
            per_seed[p].append(run(specs, make_policy(p, variant, ffs_sub_batch),
                                   make_world(variant)))
            print(f"  {family} seed {seed} {p}: {per_seed[p][-1]['avg_jct_h']:.3f} h "
                  f"({per_seed[p][-1]['wall_s']} s)", file=sys.stderr, flush=True)
    keys = [k for k in per_seed[policies[0]][0] if k.endswith("_h")]
    agg = {p: {k: _agg([r[k] for r in rows]) for k in keys} for p, rows in per_seed.items()}
    return {"family": family, "variant": variant, "ffs_sub_batch": ffs_sub_batch,
            "jobs_per_workload": len(specs),
            "seeds": seeds, "workload_summary": calib, "per_seed": per_seed, "aggregate": agg}


def xi_sweep(seeds: int, memory: bool, jobs: int = 240,
             ffs_sub_batch: FfsSubBatch = "largest-fitting") -> dict[str, Any]:
    """Fig. 6b: SJF-FFS and SJF-BSBF under one uniform xi (world and policies alike)."""
    rows: dict[str, dict[str, list[float]]] = {}
    for x in SWEEP_XI:
        key = f"{x:g}"
        rows[key] = {"sjf-ffs": [], "sjf-bsbf": []}
        for seed in range(1, seeds + 1):
            specs = generate_jobs(jobs, seed)
            mem = GPU_MEMORY_GB if memory else None
            ffs = SjfFfs(UniformXi(x), memory_gb=mem, sub_batch=ffs_sub_batch)
            bsbf = SjfBsbf(UniformXi(x), memory_gb=mem)
            for name, policy in (("sjf-ffs", ffs), ("sjf-bsbf", bsbf)):
                r = run(specs, policy, SjfBsbfWorld(UniformXi(x)))
                rows[key][name].append(r["avg_jct_h"])
        ratio = [b / f for b, f in zip(rows[key]["sjf-bsbf"], rows[key]["sjf-ffs"], strict=True)]
        print(f"  xi {x}: ffs {statistics.fmean(rows[key]['sjf-ffs']):.3f} "
              f"bsbf {statistics.fmean(rows[key]['sjf-bsbf']):.3f}", file=sys.stderr, flush=True)
        rows[key]["bsbf_over_ffs"] = ratio
    return {"jobs": jobs, "seeds": seeds, "memory_gb": GPU_MEMORY_GB if memory else None,
            "ffs_sub_batch": ffs_sub_batch, "avg_jct_h": rows}


def load_sweep(seeds: int, policies: Sequence[str]) -> dict[str, Any]:
    out: dict[str, dict[str, list[float]]] = {}
    for n in LOADS:
        out[str(n)] = {p: [] for p in policies}
        for seed in range(1, seeds + 1):
            specs = generate_jobs(n, seed)
            for p in policies:
                out[str(n)][p].append(run(specs, POLICIES[p](), SjfBsbfWorld())["avg_jct_h"])
        print(f"  load {n}: " + " ".join(f"{p} {statistics.fmean(v):.2f}"
                                          for p, v in out[str(n)].items()),
              file=sys.stderr, flush=True)
    return {"loads": list(LOADS), "seeds": seeds, "avg_jct_h": out}


def pollux_search(cases: int = 200, seed: int = 1) -> dict[str, Any]:
    """Greedy vs exhaustive GPU-count search on random small allocation problems, and the
    end-to-end effect on a small workload."""
    rng = random.Random(seed)
    pool = [j for j in generate_jobs(400, 3) if job_profile(j) is not None]
    gaps, equal = [], 0
    t_greedy = t_exh = 0.0
    for _ in range(cases):
        n = rng.randint(2, 5)
        jobs = []
        for spec in rng.sample(pool, n):
            prof = job_profile(spec)
            cur = rng.choice([0, 1, 1, 2, 4])
            j = _Job(view=None, profile=prof, current=cur,  # type: ignore[arg-type]
                     fraction=rng.random(), penalty=rng.uniform(0.5, 1.0),
                     limit=rng.choice([1, 2, 4, 8, 16]), alloc=1)
            jobs.append(j)
        free = rng.randint(1, 12)
        options = [1, 2, 3, 4, 8, 12, 16]
        t0 = time.perf_counter()
        g = greedy_counts(jobs, free, options)
        t1 = time.perf_counter()
        e = exhaustive_counts(jobs, free, options)
        t2 = time.perf_counter()
        t_greedy += t1 - t0
        t_exh += t2 - t1
        og, oe = objective(jobs, g), objective(jobs, e)
        gaps.append(og / oe - 1.0)
        equal += abs(og - oe) <= 1e-9 * oe
    # end to end: a small workload on 2x4 GPUs, where exhaustive search is affordable
    specs = [j for j in generate_jobs(120, 5) if j.num_gpus <= 8][:24]
    specs = [s.model_copy(update={"submit_time_s": 300.0 * i}) for i, s in enumerate(specs)]
    e2e = {}
    for mode in ("greedy", "exhaustive"):
        t0 = time.perf_counter()
        res = simulate(specs, parse_cluster_spec("2x4"), Pollux(search=mode),
                       progress_model=SjfBsbfWorld())
        e2e[mode] = {"avg_jct_h": res.metrics.avg_jct_s / 3600.0,
                     "wall_s": round(time.perf_counter() - t0, 2)}
    return {"cases": cases, "identical_objective": equal,
            "objective_gap": _agg(gaps), "greedy_s": t_greedy, "exhaustive_s": t_exh,
            "end_to_end_2x4_24_jobs": e2e}


class _Counting:
    """Mixin for SJF-BSBF/FFS: counts, for every pending job considered, why it did or did not
    start, and how many shares ran a smaller sub-batch than the solo one (and their worst
    predicted slow-down alone)."""

    counts: dict[str, float]

    def _bump(self, key: str, by: float = 1.0) -> None:
        self.counts[key] = self.counts.get(key, 0) + by

    def _schedule_one(self, job: Any, state: Any) -> Any:
        need = job.spec.num_gpus
        n_free = sum(len(g) for g in state.free_for(job.spec.gpu_type).values())
        single = state.single_slots(job.spec.gpu_type)
        act = super()._schedule_one(job, state)  # type: ignore[misc]
        if act is not None:
            self._bump("started_exclusive" if act.kind == "start" else "started_shared")
            prof = job_profile(job.spec)
            b = act.settings.sub_batch_size
            if act.kind == "share" and prof is not None and b is not None and b < prof.solo_b:
                self._bump("shared_with_smaller_sub_batch")
                slow = prof.slowdown(b, len(act.placement.parts))
                self.counts["worst_sub_batch_slowdown"] = max(
                    self.counts.get("worst_sub_batch_slowdown", 1.0), slow)
        elif n_free + len(single) < need:
            self._bump("waits_no_single_job_gpus")
        else:
            self._bump("waits_model_refused_or_memory")
        return act


class _CountingBsbf(_Counting, SjfBsbf):
    def __init__(self) -> None:
        super().__init__()
        self.counts = {}


class _CountingFfs(_Counting, SjfFfs):
    def __init__(self) -> None:
        super().__init__()
        self.counts = {}


def sharing_stats(seeds: int, jobs: int = 240) -> dict[str, Any]:
    """Why jobs wait under SJF-BSBF and SJF-FFS (per pending-job evaluation), reduced
    sub-batches, and the mean run-time stretch (run time / exclusive duration)."""
    rows = []
    for seed in range(1, seeds + 1):
        specs = generate_jobs(jobs, seed)
        for name, pol in (("sjf-bsbf", _CountingBsbf()), ("sjf-ffs", _CountingFfs())):
            res = simulate(specs, parse_cluster_spec(CLUSTER), pol,
                           progress_model=SjfBsbfWorld())
            stretch = statistics.fmean((c.finish_s - c.first_start_s) / c.spec.duration_s
                                       for c in res.completed)
            rows.append({"seed": seed, "policy": name, **pol.counts,
                         "mean_run_stretch": stretch})
    return {"jobs": jobs, "seeds": seeds, "per_seed": rows}


def workloads_calibration(seeds: int) -> dict[str, Any]:
    rows = {str(n): [summary(generate_jobs(n, s)) for s in range(1, seeds + 1)]
            for n in (240, 480)}
    big = summary(generate_jobs(4000, 1))
    return {"seeds": seeds, "per_seed": rows, "large_sample_4000": big}


def fit() -> dict[str, Any]:
    return {app: fit_report(app) for app in
            ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")}


# ------------------------------------------------------------------------ markdown
def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def md_tables(data: dict[str, Any]) -> str:
    agg = data["aggregate"]
    jobs = data["jobs_per_workload"]
    paper = PAPER.get(jobs) if data["family"] == "calibrated" else PAPER.get(240)
    variant = data.get("variant", "default")
    lines = [f"Family `{data['family']}` (world variant `{variant}`, SJF-FFS sub-batch "
             f"`{data.get('ffs_sub_batch', 'largest-fitting')}`), {jobs} jobs, "
             f"{data['seeds']} workloads: mean (min-max) in hours; paper numbers in brackets.",
             "",
             "| Policy | Avg JCT all | large | small | Avg queue all | large | small |",
             "|---|---|---|---|---|---|---|"]
    keys = ["avg_jct_h", "avg_jct_large_h", "avg_jct_small_h", "avg_queue_h",
            "avg_queue_large_h", "avg_queue_small_h"]
    for p, a in agg.items():
        ref = paper.get(p) if paper else None
        cells = []
        for i, k in enumerate(keys):
            v = a[k]
            cell = f"{v['mean']:.2f} ({v['min']:.2f}-{v['max']:.2f})"
            if ref is not None:
                cell += f" [{_fmt(ref[i])}]"
            cells.append(cell)
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    best = min((p for p in agg if p in NON_ELASTIC), key=lambda p: agg[p]["avg_jct_h"]["mean"])
    lines.append("")
    lines.append(f"Lowest mean avg JCT among non-elastic policies: **{best}**.")
    if "sjf-bsbf" in agg and "tiresias" in agg:
        red = 1 - agg["sjf-bsbf"]["avg_jct_h"]["mean"] / agg["tiresias"]["avg_jct_h"]["mean"]
        lines.append(f"SJF-BSBF vs Tiresias: {100 * red:.1f}% lower mean avg JCT.")
    wins = sum(1 for i in range(data["seeds"])
               if min(NON_ELASTIC, key=lambda p: data["per_seed"][p][i]["avg_jct_h"]
                      if p in data["per_seed"] else 1e9) == "sjf-bsbf")
    lines.append(f"SJF-BSBF lowest non-elastic avg JCT on {wins} of {data['seeds']} workloads.")
    return "\n".join(lines)


def md_xi(data: dict[str, Any]) -> str:
    mem = data["memory_gb"]
    lines = [f"xi sweep, calibrated {data['jobs']} jobs x {data['seeds']} seeds, memory "
             f"{'limit ' + str(mem) + ' GB' if mem else 'unlimited'}, SJF-FFS sub-batch "
             f"{data.get('ffs_sub_batch', 'largest-fitting')}:", "",
             "| xi | SJF-FFS avg JCT (h) | SJF-BSBF avg JCT (h) | BSBF/FFS mean (min-max) |",
             "|---|---|---|---|"]
    for x, row in data["avg_jct_h"].items():
        r = row["bsbf_over_ffs"]
        lines.append(f"| {x} | {statistics.fmean(row['sjf-ffs']):.3f} | "
                     f"{statistics.fmean(row['sjf-bsbf']):.3f} | "
                     f"{statistics.fmean(r):.3f} ({min(r):.3f}-{max(r):.3f}) |")
    return "\n".join(lines)


def md_load(data: dict[str, Any]) -> str:
    pols = list(next(iter(data["avg_jct_h"].values())))
    lines = [f"Load sweep (calibrated, {data['seeds']} seeds; mean avg JCT in hours):", "",
             "| jobs | " + " | ".join(pols) + " |", "|---" * (len(pols) + 1) + "|"]
    for n, row in data["avg_jct_h"].items():
        lines.append(f"| {n} | " + " | ".join(f"{statistics.fmean(row[p]):.2f}" for p in pols)
                     + " |")
    return "\n".join(lines)


def md_search(data: dict[str, Any]) -> str:
    g = data["objective_gap"]
    e = data["end_to_end_2x4_24_jobs"]
    return (f"Pollux search, {data['cases']} random cases: greedy = exhaustive optimum in "
            f"{data['identical_objective']}; objective gap mean {100 * g['mean']:.2f}%, max "
            f"{100 * g['max']:.2f}%; time greedy {data['greedy_s']:.3f} s vs exhaustive "
            f"{data['exhaustive_s']:.3f} s. End to end (2x4, 24 jobs): greedy "
            f"{e['greedy']['avg_jct_h']:.3f} h ({e['greedy']['wall_s']} s), exhaustive "
            f"{e['exhaustive']['avg_jct_h']:.3f} h ({e['exhaustive']['wall_s']} s).")


def md_sharing(data: dict[str, Any]) -> str:
    keys = ["started_exclusive", "started_shared", "shared_with_smaller_sub_batch",
            "worst_sub_batch_slowdown", "waits_no_single_job_gpus",
            "waits_model_refused_or_memory", "mean_run_stretch"]
    lines = [f"Pending-job evaluations, calibrated {data['jobs']} jobs:", "",
             "| seed | policy | " + " | ".join(keys) + " |", "|---" * (len(keys) + 2) + "|"]
    for r in data["per_seed"]:
        cells = []
        for k in keys:
            v = r.get(k, 0)
            cells.append(f"{v:.2f}" if k in ("mean_run_stretch", "worst_sub_batch_slowdown")
                         else str(int(v)))
        lines.append(f"| {r['seed']} | {r.get('policy', 'sjf-bsbf')} | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines)


def md_workloads(data: dict[str, Any]) -> str:
    lines = ["| jobs | seed | large fraction | mean runtime (h) | large (h) | small (h) |",
             "|---|---|---|---|---|---|"]
    for n, rows in data["per_seed"].items():
        for i, r in enumerate(rows, 1):
            lines.append(f"| {n} | {i} | {r['large_fraction']:.3f} | {r['mean_runtime_h']:.3f} "
                         f"| {r['mean_runtime_large_h']:.3f} | {r['mean_runtime_small_h']:.3f} |")
    b = data["large_sample_4000"]
    lines.append(f"| 4000 | 1 | {b['large_fraction']:.3f} | {b['mean_runtime_h']:.3f} | "
                 f"{b['mean_runtime_large_h']:.3f} | {b['mean_runtime_small_h']:.3f} |")
    return "\n".join(lines)


def md_fit(data: dict[str, Any]) -> str:
    lines = ["| app | alpha_c | beta_c | alpha_r | beta_r | alpha_n | beta_n | delta | "
             "median err | p90 err |", "|---" * 10 + "|"]
    for app, r in data.items():
        if not isinstance(r, dict) or "delta" not in r:
            continue
        lines.append(f"| {app} | {r['alpha_c']:.4f} | {r['beta_c']:.5f} | {r['alpha_r']:.4f} | "
                     f"{r['beta_r']:.5f} | {r['alpha_n']:.4f} | {r['beta_n']:.5f} | "
                     f"{r['delta']:.2f} | {100 * r['median_rel_err']:.1f}% | "
                     f"{100 * r['p90_rel_err']:.1f}% |")
    return "\n".join(lines)


def report() -> None:
    for name in sorted(p.stem[len("sjf_bsbf_"):] for p in RESULTS.glob("sjf_bsbf_*.json")):
        data = load(name)
        assert data is not None
        print(f"### {name}\n")
        if name.startswith("tables"):
            print(md_tables(data))
        elif name.startswith("xi"):
            print(md_xi(data))
        elif name == "load_sweep":
            print(md_load(data))
        elif name == "pollux_search":
            print(md_search(data))
        elif name == "workloads":
            print(md_workloads(data))
        elif name == "sharing_stats":
            print(md_sharing(data))
        elif name == "fit":
            print(md_fit(data))
        print()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", choices=["tables", "xi-sweep", "load-sweep", "pollux-search",
                                           "sharing-stats", "workloads", "fit", "report"])
    ap.add_argument("--family", choices=["pollux", "pollux-2.0", "calibrated"],
                    default="calibrated")
    ap.add_argument("--jobs", type=int, default=240)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--no-memory", action="store_true", help="xi sweep without memory limit")
    ap.add_argument("--ffs-sub-batch", choices=["largest-fitting", "full"],
                    default="largest-fitting",
                    help="xi sweep and tables: SJF-FFS's sub-batch reading (full = no "
                         "gradient accumulation; results get the suffix _ffs_full)")
    ap.add_argument("--variant", choices=VARIANTS, default="default",
                    help="tables: world variant (Gavel analogues for xi, no memory limit, or "
                         "every placement counted as packed)")
    args = ap.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    for p in policies:
        if p not in POLICIES:
            ap.error(f"unknown policy {p!r}; known: {', '.join(POLICIES)}")
    if args.experiment == "tables":
        data = tables(args.family, args.jobs, args.seeds, policies, args.variant,
                      args.ffs_sub_batch)
        name = f"tables_{args.family}" + (f"_{args.jobs}" if args.family == "calibrated" else "")
        if args.variant != "default":
            name += "_" + args.variant.replace("-", "_")
        if args.ffs_sub_batch == "full":
            name += "_ffs_full"
        save(name, {"command": " ".join(sys.argv), **data})
        print(md_tables(data))
    elif args.experiment == "xi-sweep":
        data = xi_sweep(args.seeds, memory=not args.no_memory, jobs=args.jobs,
                        ffs_sub_batch=args.ffs_sub_batch)
        save("xi_sweep" + ("_no_memory" if args.no_memory else "")
             + ("_ffs_full" if args.ffs_sub_batch == "full" else ""),
             {"command": " ".join(sys.argv), **data})
        print(md_xi(data))
    elif args.experiment == "load-sweep":
        data = load_sweep(args.seeds, policies)
        save("load_sweep", {"command": " ".join(sys.argv), **data})
        print(md_load(data))
    elif args.experiment == "pollux-search":
        data = pollux_search()
        save("pollux_search", {"command": " ".join(sys.argv), **data})
        print(md_search(data))
    elif args.experiment == "sharing-stats":
        data = sharing_stats(args.seeds, args.jobs)
        save("sharing_stats", {"command": " ".join(sys.argv), **data})
        print(md_sharing(data))
    elif args.experiment == "workloads":
        data = workloads_calibration(args.seeds)
        save("workloads", {"command": " ".join(sys.argv), **data})
        print(md_workloads(data))
    elif args.experiment == "fit":
        data = fit()
        save("fit", {"command": " ".join(sys.argv), **data})
        print(md_fit(data))
    else:
        report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
