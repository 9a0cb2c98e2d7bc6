"""Re-run Muri's Figures 9-11 (and the testbed trace of Tables 4/5) in the simulator.

Run (each run is one subprocess, one at a time; results are merged into the JSON, so the work
can be split over several invocations):

    python benchmarks/repro_muri.py                       # everything (long: see the doc)
    python benchmarks/repro_muri.py --traces trace3 --policies srsf,muri-s
    python benchmarks/repro_muri.py --report-only         # print the markdown from the JSON

Setting (spec ``shared/specs/muri.md`` sections 1.1, 2.10, 4): 8 nodes x 8 GPUs (the artifact's
``n8g8`` cluster spec, 64 GPUs), event-driven scheduling, every policy in the "muri" world
(isolated iteration time x 1.015, interleaving groups at the calibrated group period,
AntMan's gap-filling for opportunistic jobs), restart overhead 10 s per (re)start (the
framework charges it per restart; the artifact charges 4-46 s per model at every event).
Metrics: average JCT, makespan (last completion; the traces start at 0) and p99 JCT as the
artifact computes it (``sorted(jct)[int(0.99 n)]``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CLUSTER = "8x8"
OVERHEAD_S = 10.0
TRACES = ["trace1", "trace1_pr", "trace3", "trace4", "cluster_trace"]
POLICIES = ["srtf", "srsf", "muri-s", "tiresias-3q", "themis", "antman", "muri-l",
            "muri-l-worst-ordering", "muri-l-no-blossom"]
OUT = "benchmarks/results/muri_repro.json"

# The paper's raw values (spec section 4.5, from the artifact's draw_fig9-10.py,
# draw_fig11-13.py and the testbed logs). Trace names as bundled: trace1_pr = trace 1'.
PAPER: dict[str, dict[str, dict[str, float]]] = {
    "avg_jct_s": {
        "trace1": {"srtf": 1370603, "srsf": 980141, "muri-s": 867706, "tiresias-3q": 3330371,
                   "antman": 5476391, "themis": 1823179, "muri-l": 1072010,
                   "muri-l-worst-ordering": 1482465, "muri-l-no-blossom": 1192785},
        "trace1_pr": {"srtf": 2303544, "srsf": 1801860, "muri-s": 1467192,
                      "tiresias-3q": 6921683, "antman": 9808251, "themis": 3314303,
                      "muri-l": 2141937},
        "trace3": {"srtf": 193082, "srsf": 185022, "muri-s": 85503, "tiresias-3q": 347213,
                   "antman": 305454, "themis": 397059, "muri-l": 88687,
                   "muri-l-worst-ordering": 146324, "muri-l-no-blossom": 96017},
        "trace4": {"srtf": 581983, "srsf": 487167, "muri-s": 365468, "tiresias-3q": 1319383,
                   "antman": 2212463, "themis": 994971, "muri-l": 429175,
                   "muri-l-worst-ordering": 614727, "muri-l-no-blossom": 487578},
        "cluster_trace": {"srtf": 249140.18, "srsf": 238612.09, "muri-s": 117634.55,
                          "tiresias-3q": 336533.17, "themis": 461456.23, "muri-l": 129744.66},
    },
    "makespan_s": {
        "trace1": {"srtf": 26045466, "srsf": 26065759, "muri-s": 18446535,
                   "tiresias-3q": 23556410, "antman": 21788669, "themis": 24658269,
                   "muri-l": 18593246},
        "trace1_pr": {"srtf": 24513544, "srsf": 24272530, "muri-s": 16596421,
                      "tiresias-3q": 21990478, "antman": 20285086, "themis": 23369493,
                      "muri-l": 16639500},
        "trace3": {"srtf": 8174135, "srsf": 8174135, "muri-s": 8174135,
                   "tiresias-3q": 8174226, "antman": 8174140, "themis": 8172105,
                   "muri-l": 8174135},
        "trace4": {"srtf": 14787991, "srsf": 14887909, "muri-s": 11029124,
                   "tiresias-3q": 13073839, "antman": 12292271, "themis": 13793094,
                   "muri-l": 10918239},
        "cluster_trace": {"srtf": 4156633.26, "srsf": 4223121.82, "muri-s": 2662548.29,
                          "tiresias-3q": 3959796.87, "themis": 3924818.88,
                          "muri-l": 2666872.44},
    },
    "p99_jct_s": {
        "trace1": {"srtf": 16647148, "srsf": 15529913, "muri-s": 10618148,
                   "tiresias-3q": 14739852, "antman": 13690482, "themis": 17159064,
                   "muri-l": 11322990},
        "trace1_pr": {"srtf": 19871388, "srsf": 18267308, "muri-s": 13395943,
                      "tiresias-3q": 21765401, "antman": 20130533, "themis": 20555281,
                      "muri-l": 13214336},
        "trace3": {"srtf": 4538891, "srsf": 4189699, "muri-s": 992405, "tiresias-3q": 4983397,
                   "antman": 3904421, "themis": 2967333, "muri-l": 927167},
        "trace4": {"srtf": 7768533, "srsf": 7372568, "muri-s": 3734841,
                   "tiresias-3q": 8663312, "antman": 6438231, "themis": 7968472,
                   "muri-l": 4719318},
        "cluster_trace": {"srtf": 2723588.79, "srsf": 3138494.38, "muri-s": 822571.68,
                          "tiresias-3q": 2812808.29, "themis": 2876142.92,
                          "muri-l": 1106155.68},
    },
}
# Fig. 11 makespan ratios for the ablations (spec 4.5), vs Muri-L.
PAPER_ABLATION_MAKESPAN = {
    "muri-l-worst-ordering": {"trace1": 1.172, "trace3": 1.000, "trace4": 1.096},
    "muri-l-no-blossom": {"trace1": 1.057, "trace3": 1.000, "trace4": 1.037},
}
#: (baseline, reference): the ratios the paper plots (baseline / Muri).
RATIOS = [("srtf", "muri-s"), ("srsf", "muri-s"), ("tiresias-3q", "muri-l"),
          ("themis", "muri-l"), ("antman", "muri-l"), ("muri-l-worst-ordering", "muri-l"),
          ("muri-l-no-blossom", "muri-l")]
#: Extra runs (not in the paper's figures as such): the paper's value is the column's.
EXTRAS = {"themis-iso-bug": "themis", "muri-l-no-blossom@muri-noblossom": "muri-l-no-blossom",
          "tiresias-3q-running-first": "tiresias-3q"}


def running_first_tiresias() -> object:
    """Diagnostic (not a registered policy): ``tiresias-3q`` with the artifact's in-queue
    order, where running jobs stay ahead of pending ones in their queue (``dlas_sim_jobs``
    moves pending jobs to the end of their queue after every pass); the framework's Tiresias
    orders a queue by entry time only."""
    from bisect import bisect_right

    from slurm_sched.model import JobState
    from slurm_sched.policy.placement import pack_most_free
    from slurm_sched.policy.queue_based import preemptive_in_order
    from slurm_sched.policy.tiresias import TIRESIAS_SIM_THRESHOLDS_GPU_S, Tiresias

    class RunningFirst(Tiresias):
        name = "tiresias-3q-running-first"

        def decide(self, snapshot, now_s):  # type: ignore[no-untyped-def]
            if not snapshot.pending:
                return []
            keyed = []
            for j in snapshot.jobs:
                spec = j.spec
                running = j.state is JobState.RUNNING
                executed = j.executed_s + (now_s - j.accounted_at_s if running else 0.0)
                q = bisect_right(self._bounds, executed * spec.num_gpus)
                prev = self._entered.get(spec.job_id)
                if prev is None or prev[0] != q:
                    prev = (q, now_s if q else spec.submit_time_s)
                    self._entered[spec.job_id] = prev
                waiting = j.state is JobState.PENDING
                keyed.append((q, waiting, prev[1], spec.submit_time_s, spec.job_id, j))
            keyed.sort(key=lambda k: k[:5])
            return preemptive_in_order(snapshot, [k[5] for k in keyed], packer=pack_most_free)

    return RunningFirst(TIRESIAS_SIM_THRESHOLDS_GPU_S)


def make_policy(name: str) -> tuple[object, str]:
    """``policy[@world]``: a registered policy, or a diagnostic variant (``themis-iso-bug``:
    Themis with the artifact's isolated-throughput bug; ``tiresias-3q-running-first``); the
    world defaults to "muri"."""
    from slurm_sched.policy import registry
    from slurm_sched.policy.themis import Themis

    pol_name, _, world = name.partition("@")
    if pol_name == "themis-iso-bug":
        pol: object = Themis(artifact_iso_bug=True)
    elif pol_name == "tiresias-3q-running-first":
        pol = running_first_tiresias()
    else:
        pol = registry.create(pol_name)
    return pol, world or "muri"


def run_one(trace: str, policy: str, cluster: str, overhead_s: float) -> dict:
    """In the child process: simulate one policy on one trace."""
    from slurm_sched.model import parse_cluster_spec
    from slurm_sched.sim.runner import simulate
    from slurm_sched.traces import bundled, read_trace

    jobs = read_trace(bundled(f"muri/{trace}.csv"))
    pol, world = make_policy(policy)
    t0 = time.perf_counter()
    res = simulate(jobs, parse_cluster_spec(cluster), pol,  # type: ignore[arg-type]
                   restart_overhead_s=overhead_s, progress_model=world)
    wall = time.perf_counter() - t0
    jct = sorted(c.jct_s for c in res.completed)
    return {
        "trace": trace,
        "policy": policy,
        "world": world,
        "cluster": cluster,
        "restart_overhead_s": overhead_s,
        "jobs": len(jobs),
        "completed": len(jct),
        "avg_jct_s": sum(jct) / len(jct),
        "makespan_s": max(c.finish_s for c in res.completed),
        "p99_jct_s": jct[int(0.99 * len(jct))],
        "p99_jct_interp_s": res.metrics.p99_jct_s,
        "gpu_util": res.metrics.gpu_util,
        "preemptions": res.metrics.preemptions,
        "cycles": res.stats.cycles,
        "actions": dict(res.stats.by_kind),
        "wall_s": round(wall, 1),
    }


def load(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"setting": {"cluster": CLUSTER, "restart_overhead_s": OVERHEAD_S,
                        "progress_model": "muri", "scheduling": "event-driven"},
            "paper": PAPER, "runs": {}}


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def report(data: dict) -> str:
    runs = data["runs"]
    traces = [t for t in TRACES if any(k.startswith(t + "/") for k in runs)]
    out: list[str] = []
    for metric, title in (("avg_jct_s", "Average JCT (s)"), ("makespan_s", "Makespan (s)"),
                          ("p99_jct_s", "p99 JCT (s)")):
        out.append(f"#### {title}: ours / paper\n")
        out.append("| policy | " + " | ".join(traces) + " |")
        out.append("|---|" + "---|" * len(traces))
        for pol in POLICIES + [e for e in EXTRAS if any(k.endswith("/" + e) for k in runs)]:
            cells = []
            for t in traces:
                r = runs.get(f"{t}/{pol}")
                ours = r[metric] if r else None
                paper = PAPER[metric].get(t, {}).get(EXTRAS.get(pol, pol))
                if ours is None and paper is None:
                    cells.append("-")
                else:
                    cells.append(f"{fmt(ours)} / {fmt(paper)}")
            out.append(f"| {pol} | " + " | ".join(cells) + " |")
        out.append("")
    for metric, title in (("avg_jct_s", "avg JCT"), ("makespan_s", "makespan"),
                          ("p99_jct_s", "p99 JCT")):
        out.append(f"#### Ratios baseline / Muri, {title}: ours / paper\n")
        out.append("| ratio | " + " | ".join(traces) + " |")
        out.append("|---|" + "---|" * len(traces))
        extra = [(e, "muri-l") for e in EXTRAS if any(k.endswith("/" + e) for k in runs)]
        for base, ref in RATIOS + extra:
            cells = []
            for t in traces:
                rb, rr = runs.get(f"{t}/{base}"), runs.get(f"{t}/{ref}")
                ours = ratio(rb[metric] if rb else None, rr[metric] if rr else None)
                pb = PAPER[metric].get(t, {}).get(EXTRAS.get(base, base))
                pr = PAPER[metric].get(t, {}).get(ref)
                theirs = ratio(pb, pr)
                if metric == "makespan_s" and EXTRAS.get(base, base) in PAPER_ABLATION_MAKESPAN:
                    v = PAPER_ABLATION_MAKESPAN[EXTRAS.get(base, base)].get(t)
                    theirs = "-" if v is None else f"{v:.2f}"
                cells.append(f"{ours} / {theirs}")
            out.append(f"| {base} / {ref} | " + " | ".join(cells) + " |")
        out.append("")
    out.append("#### Runs\n")
    out.append("| trace | policy | jobs | preemptions | cycles | wall (s) |")
    out.append("|---|---|---|---|---|---|")
    for key in sorted(runs):
        r = runs[key]
        out.append(f"| {r['trace']} | {r['policy']} | {r['completed']}/{r['jobs']} | "
                   f"{r['preemptions']} | {r['cycles']} | {r['wall_s']} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default=",".join(TRACES))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--cluster", default=CLUSTER)
    ap.add_argument("--overhead", type=float, default=OVERHEAD_S)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--force", action="store_true", help="re-run runs already in the JSON")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per run, seconds")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child[0], args.child[1], args.cluster, args.overhead)))
        return 0
    path = Path(args.out)
    data = load(path)
    if not args.report_only:
        for trace in args.traces.split(","):
            for policy in args.policies.split(","):
                key = f"{trace}/{policy}"
                if key in data["runs"] and not args.force:
                    continue
                cmd = [sys.executable, __file__, "--child", trace, policy,
                       "--cluster", args.cluster, "--overhead", str(args.overhead)]
                try:
                    done = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                          timeout=args.timeout, env=dict(os.environ))
                except subprocess.TimeoutExpired:
                    print(f"{key}: timed out after {args.timeout:.0f} s", file=sys.stderr)
                    continue
                except subprocess.CalledProcessError as e:
                    print(f"{key}: failed\n{e.stderr[-2000:]}", file=sys.stderr)
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                data["runs"][key] = row
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
                print(f"{key}: avg JCT {row['avg_jct_s']:,.0f} s, makespan "
                      f"{row['makespan_s']:,.0f} s ({row['wall_s']} s)", file=sys.stderr)
    print(report(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
