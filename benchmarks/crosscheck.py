"""Cross-check our simulator against the authors' own simulators, on the same inputs.

For every (artifact, trace, policy) that an artifact's output covers, run our policy in the
artifact's profile (``--profile <artifact>-artifact``: its world, restart cost and decision
timing) and in our default profile, and compare with what the authors' simulator gives: average
JCT, and job by job where it printed per-job output (share of jobs whose JCT is within 1% of
its, the worst jobs named).

    python benchmarks/crosscheck.py                      # every pair (long: see the doc)
    python benchmarks/crosscheck.py --artifacts rubick   # one artifact's pairs
    python benchmarks/crosscheck.py --report-only        # the markdown table from the JSON
    # diagnosis: one change (a policy option, a profile field), printed, the JSON untouched
    python benchmarks/crosscheck.py --artifacts muri --traces trace3 --policies tiresias-3q \
        --profiles artifact -o queue_order=entry --dump /tmp/xc
    python benchmarks/crosscheck.py --artifacts pollux --profiles artifact --set round_s=null
    # any trace in an artifact's format, one JSON object per policy (as `compare --format json`)
    python benchmarks/crosscheck.py --artifact muri --trace PATH --policies srtf,muri-s \
        --format json

Runs already in the JSON are skipped (``--force`` re-runs them; so does ``--dump``, which needs
the run), so the work can be split over several invocations; the JSON is written after every
run.

Where the authors' numbers come from (``benchmarks/peer/README.md`` has the commands
and versions): Muri's simulator (Rivendile/Muri @4e69a78) per job on traces 1 and 3, and its
published raw values (``draw_fig9-10.py``, quoted in the Muri spec) for traces 1,
1', 3, 3', 4 and 4'; Rubick's artifact simulator (AlibabaPAI/reconfigurable-dl-scheduler
@80e8524) per job on the base trace; Pollux's published results (petuum/adaptdl @c793c70,
``simulator/results-jobload/``) per job on workloads 1-8 at loads 0.5, 1.0 and 1.5.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from slurm_sched.model import Cluster, JobSpec, parse_cluster_spec  # noqa: E402
from slurm_sched.sim import profile as profiles  # noqa: E402
from slurm_sched.sim.runner import SimulationResult  # noqa: E402
from slurm_sched.traces import bundled, read_trace  # noqa: E402

PEER = ROOT / "benchmarks" / "peer"  # the authors' simulators' outputs (its README.md)
OUT = ROOT / "benchmarks" / "results" / "crosscheck.json"
#: A job agrees when its JCT is within this share of the artifact's.
JOB_TOLERANCE = 0.01
#: An average agrees when within this share of the artifact's.
AVG_TOLERANCE = 0.05
PROFILES = ("artifact", "default")


# ============================================================================ artifacts
@dataclass(frozen=True)
class Reference:
    """What an artifact gives for one (trace, policy): its average JCT, maybe per job."""

    avg_jct_s: float
    source: str
    jobs: dict[str, float] | None = None  # job id -> JCT (s)


@dataclass(frozen=True)
class Pair:
    artifact: str
    trace: str
    policy: str  # the row's name: ours, maybe with a reading, e.g. "muri-s"
    reference: Reference

    @property
    def key(self) -> str:
        return f"{self.artifact}/{self.trace}/{self.policy}"


@dataclass
class Artifact:
    """One authors' simulator: its profile (which names its cluster), traces and the pairs it
    covers."""

    name: str
    profile: str
    trace: Callable[[str], list[JobSpec]]
    pairs: Callable[[], list[Pair]]
    #: our policy for a row name (registry name and options)
    policy: Callable[[str], tuple[str, dict[str, object]]] = lambda n: (n, {})

    def cluster(self) -> Cluster:
        shape = profiles.get(self.profile).cluster
        assert shape is not None, f"profile {self.profile} names no cluster"
        return parse_cluster_spec(shape)


def zero_submits(jobs: list[JobSpec]) -> list[JobSpec]:
    """The same jobs all submitted at 0 (Muri's primed traces 1'-4')."""
    return [j.model_copy(update={"submit_time_s": 0.0}) for j in jobs]


# --- Muri
MURI_PUBLISHED_AVG_S: dict[str, dict[str, float]] = {
    # spec shared/specs/muri.md, "Figures 9/10 (simulation, 64 GPUs, raw values in seconds)"
    "srtf": {"trace1": 1370603, "trace1_pr": 2303544, "trace3": 193082, "trace3_pr": 844395,
             "trace4": 581983, "trace4_pr": 1430856},
    "srsf": {"trace1": 980141, "trace1_pr": 1801860, "trace3": 185022, "trace3_pr": 798058,
             "trace4": 487167, "trace4_pr": 1218502},
    "muri-s": {"trace1": 867706, "trace1_pr": 1467192, "trace3": 85503, "trace3_pr": 537777,
               "trace4": 365468, "trace4_pr": 954225},
    "tiresias-3q": {"trace1": 3330371, "trace1_pr": 6921683, "trace3": 347213,
                    "trace3_pr": 2213110, "trace4": 1319383, "trace4_pr": 2674023},
    "antman": {"trace1": 5476391, "trace1_pr": 9808251, "trace3": 305454, "trace3_pr": 2674393,
               "trace4": 2212463, "trace4_pr": 4676093},
    "themis": {"trace1": 1823179, "trace1_pr": 3314303, "trace3": 397059, "trace3_pr": 1502768,
               "trace4": 994971, "trace4_pr": 2271053},
    "muri-l": {"trace1": 1072010, "trace1_pr": 2141937, "trace3": 88687, "trace3_pr": 921095,
               "trace4": 429175, "trace4_pr": 1488034},
}
#: benchmarks/peer/muri file per row name (per-job output of the artifact's simulator)
MURI_PEER_FILES = {"srtf": "srtf", "srsf": "srsf", "tiresias-3q": "tiresias-3q",
                   "antman": "antman", "muri-s": "muri-s-noautopack", "muri-l": "muri-l",
                   "muri-s-autopack": "muri-s"}
MURI_TRACES = ("trace1", "trace1_pr", "trace3", "trace3_pr", "trace4", "trace4_pr")


def muri_trace(name: str) -> list[JobSpec]:
    if name in ("trace3_pr", "trace4_pr"):  # not bundled: the same jobs, all submitted at 0
        return zero_submits(read_trace(bundled(f"muri/{name[:-3]}.csv")))
    return read_trace(bundled(f"muri/{name}.csv"))


def muri_peer_jobs(trace: str, stem: str) -> Reference | None:
    path = PEER / "muri" / trace / f"{stem}.csv"
    if not path.exists():
        return None
    with path.open() as f:
        jobs = {r["job_id"]: float(r["JCT"]) for r in csv.DictReader(f)}
    return Reference(sum(jobs.values()) / len(jobs), f"peer/muri/{trace}/{stem}.csv",
                     jobs)


#: Per-job output of the artifact's code whose average is not the published one (its README):
#: the published average stays the reference, the jobs are compared with this run.
MURI_PEER_JOBS_ONLY = {"themis": "themis"}
PUBLISHED = "published (spec muri.md, Fig. 9/10)"


def muri_pairs() -> list[Pair]:
    pairs = []
    for policy, by_trace in MURI_PUBLISHED_AVG_S.items():
        for trace in MURI_TRACES:
            peer = muri_peer_jobs(trace, MURI_PEER_FILES.get(policy, ""))
            ref = peer or Reference(by_trace[trace], PUBLISHED)
            run = muri_peer_jobs(trace, MURI_PEER_JOBS_ONLY.get(policy, ""))
            if run is not None:
                ref = Reference(by_trace[trace], f"{PUBLISHED}; per job: {run.source} "
                                f"(its average {run.avg_jct_s:,.0f} s)", run.jobs)
            pairs.append(Pair("muri", trace, policy, ref))
    peer = muri_peer_jobs("trace3", MURI_PEER_FILES["muri-s-autopack"])
    assert peer is not None
    pairs.append(Pair("muri", "trace3", "muri-s-autopack", peer))
    return pairs


def muri_policy(row: str) -> tuple[str, dict[str, object]]:
    if row == "muri-s-autopack":
        return "muri-s", {"autopack": True}
    return row, {}


# --- Rubick
def rubick_pairs() -> list[Pair]:
    with (PEER / "rubick" / "base-rubick.csv").open() as f:
        jobs = {r["job"]: float(r["jct_s"]) for r in csv.DictReader(f)}
    ref = Reference(sum(jobs.values()) / len(jobs), "peer/rubick/base-rubick.csv", jobs)
    return [Pair("rubick", "base", "rubick", ref)]


def rubick_trace(name: str) -> list[JobSpec]:
    assert name == "base"
    return read_trace(bundled("rubick/workloads/workload-base.csv"))


# --- Pollux
POLLUX_LOADS = ("0.5", "1.0", "1.5")
POLLUX_POLICIES = ("tiresias", "pollux")  # the peer's optimus has no counterpart here


def pollux_pairs() -> list[Pair]:
    pairs = []
    for policy in POLLUX_POLICIES:
        for load in POLLUX_LOADS:
            path = PEER / "pollux" / f"{policy}-{load}.json"
            data = json.loads(path.read_text())
            for w in sorted(data["jcts"], key=lambda s: int(s.split("-")[1])):
                jobs = {k: float(v) for k, v in data["jcts"][w].items()}
                ref = Reference(float(data["avgs"][w]), f"peer/pollux/{path.name}", jobs)
                pairs.append(Pair("pollux", f"workloads-{load}/{w}", policy, ref))
    return pairs


def pollux_trace(name: str) -> list[JobSpec]:
    return read_trace(bundled(f"pollux/{name}.csv"))


ARTIFACTS: dict[str, Artifact] = {
    "muri": Artifact("muri", "muri-artifact", muri_trace, muri_pairs, muri_policy),
    "rubick": Artifact("rubick", "rubick-artifact", rubick_trace, rubick_pairs),
    "pollux": Artifact("pollux", "pollux-artifact", pollux_trace, pollux_pairs),
}


# ============================================================================ runs
@dataclass(frozen=True)
class Change:
    """One-change diagnosis: policy options over the profile's and replaced profile fields."""

    options: dict[str, object]
    fields: dict[str, object]

    def __bool__(self) -> bool:
        return bool(self.options or self.fields)


NO_CHANGE = Change({}, {})


def run(artifact: Artifact, jobs: list[JobSpec], row: str, profile: str,
        change: Change = NO_CHANGE) -> SimulationResult:
    """Our policy of ``row`` on ``jobs`` in the artifact's cluster under ``profile``
    (``artifact`` or ``default``), every job completed."""
    from slurm_sched.sim.runner import simulate

    name, options = artifact.policy(row)
    prof = profiles.get(artifact.profile if profile == "artifact" else "default")
    prof = dataclasses.replace(prof, **change.fields)
    res = simulate(jobs, artifact.cluster(), name, profile=prof,
                   policy_options={**options, **change.options})
    if len(res.completed) != len(jobs):
        raise RuntimeError(f"{row}: {len(res.completed)} of {len(jobs)} jobs completed "
                           f"({len(res.rejected)} rejected)")
    return res


def compare_jobs(ours: dict[str, float], theirs: dict[str, float],
                 submit: dict[str, float]) -> dict[str, object]:
    """Per-job agreement of JCTs ``ours`` with the artifact's ``theirs`` (job id -> s), jobs
    submitted at ``submit``: the share of the artifact's jobs whose completion time (submit +
    JCT) is within :data:`JOB_TOLERANCE` of its (``end_within_1pct``), the same for the JCT
    itself (``jct_within_1pct``, stricter: a short job's few seconds count), and the five jobs
    with the largest relative JCT error (job, ours, theirs)."""
    missing = sorted(set(theirs) - set(ours))
    if missing:
        raise RuntimeError(f"{len(missing)} of the artifact's jobs have no run here, "
                           f"e.g. {missing[:3]}")

    def jct_err(j: str) -> float:
        return abs(ours[j] - theirs[j]) / max(theirs[j], 1e-9)

    def end_err(j: str) -> float:
        return abs(ours[j] - theirs[j]) / max(submit[j] + theirs[j], 1e-9)

    n = len(theirs)
    worst = sorted(theirs, key=jct_err, reverse=True)[:5]
    return {"jobs": n,
            "end_within_1pct": sum(end_err(j) <= JOB_TOLERANCE for j in theirs) / n,
            "jct_within_1pct": sum(jct_err(j) <= JOB_TOLERANCE for j in theirs) / n,
            "worst": [[j, round(ours[j], 1), round(theirs[j], 1)] for j in worst]}


def run_pair(artifact: Artifact, pair: Pair, profile: str, change: Change = NO_CHANGE,
             dump: Path | None = None) -> dict[str, object]:
    """One pair in one profile (``artifact`` or ``default``); ``dump``: a CSV per job (ours
    and the artifact's JCT, our first start, end, running time and preemptions)."""
    jobs = artifact.trace(pair.trace)
    t0 = time.perf_counter()
    done = run(artifact, jobs, pair.policy, profile, change).completed
    jcts = {c.spec.job_id: c.jct_s for c in done}
    if dump is not None:
        theirs = pair.reference.jobs or {}
        with dump.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["job", "submit_s", "first_start_s", "end_s", "jct_s", "theirs_jct_s",
                        "executed_s", "preemptions"])
            for c in sorted(done, key=lambda c: c.spec.submit_time_s):
                j = c.spec.job_id
                w.writerow([j, c.spec.submit_time_s, round(c.first_start_s, 3),
                            round(c.finish_s, 3), round(c.jct_s, 3), theirs.get(j, ""),
                            round(c.executed_s, 3), c.preemptions])
    avg = sum(jcts.values()) / len(jcts)
    out: dict[str, object] = {
        "artifact": pair.artifact, "trace": pair.trace, "policy": pair.policy,
        "profile": artifact.profile if profile == "artifact" else "default",
        "avg_jct_s": avg, "theirs_avg_jct_s": pair.reference.avg_jct_s,
        "ratio": avg / pair.reference.avg_jct_s, "source": pair.reference.source,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    if change:
        out["change"] = {"options": change.options, "profile": change.fields}
    if pair.reference.jobs is not None:
        submit = {j.job_id: j.submit_time_s for j in jobs}
        out["per_job"] = compare_jobs(jcts, pair.reference.jobs, submit)
    return out


# ============================================================================ report
def fmt_s(v: float) -> str:
    return f"{v:,.0f}"


def report(results: dict[str, dict]) -> str:
    lines = [
        "| artifact | trace | policy | theirs avg JCT (s) | ours, artifact profile | ratio "
        "| jobs within 1%: end / JCT | ours, default profile | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows: dict[tuple[int, str, str, str], dict[str, dict]] = {}
    for key, r in results.items():
        which = key.rpartition("@")[2]
        row = (list(ARTIFACTS).index(r["artifact"]), r["policy"], _trace_order(r["trace"]),
               r["trace"])
        rows.setdefault(row, {})[which] = r
    for row in sorted(rows):
        by = rows[row]
        a, d = by.get("artifact"), by.get("default")
        any_r = a or d
        assert any_r is not None
        pj = a.get("per_job") if a else None
        cells = [
            any_r["artifact"], any_r["trace"], any_r["policy"], fmt_s(any_r["theirs_avg_jct_s"]),
            fmt_s(a["avg_jct_s"]) if a else "-", f"{a['ratio']:.3f}" if a else "-",
            f"{pj['end_within_1pct']:.0%} / {pj['jct_within_1pct']:.0%} of {pj['jobs']}"
            if pj else "-",
            fmt_s(d["avg_jct_s"]) if d else "-", f"{d['ratio']:.3f}" if d else "-",
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def summary(results: dict[str, dict]) -> str:
    """Per (artifact, policy, profile): pairs whose average is within :data:`AVG_TOLERANCE`,
    and the share of jobs within :data:`JOB_TOLERANCE` over every pair with per-job output."""
    groups: dict[tuple[int, str, str], list[dict]] = {}
    for key, r in results.items():
        which = key.rpartition("@")[2]
        groups.setdefault((list(ARTIFACTS).index(r["artifact"]), r["policy"], which),
                          []).append(r)
    lines = ["| artifact | policy | profile | pairs with the average within 5% | ratios "
             "| jobs whose end is within 1% | jobs whose JCT is within 1% |",
             "|---|---|---|---|---|---|---|"]
    for (_, policy, which), rs in sorted(groups.items()):
        ok = sum(abs(r["ratio"] - 1) <= AVG_TOLERANCE for r in rs)
        ratios = [r["ratio"] for r in rs]
        per_job = [r["per_job"] for r in rs if "per_job" in r]
        jobs = sum(p["jobs"] for p in per_job)
        shares = [sum(p[k] * p["jobs"] for p in per_job) / jobs if jobs else None
                  for k in ("end_within_1pct", "jct_within_1pct")]
        cells = [rs[0]["artifact"], policy, which, f"{ok} of {len(rs)}",
                 f"{min(ratios):.3f}-{max(ratios):.3f}" if len(rs) > 1 else f"{ratios[0]:.3f}",
                 *(f"{v:.1%} of {jobs:,}" if v is not None else "-" for v in shares)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _trace_order(trace: str) -> str:
    """Natural order: workload-2 before workload-10."""
    return "".join(f"{int(p):06d}" if p.isdigit() else p
                   for p in trace.replace("-", " - ").replace("/", " / ").split())


def load(path: Path) -> dict[str, dict]:
    return json.loads(path.read_text())["runs"] if path.exists() else {}


def save(path: Path, runs: dict[str, dict]) -> None:
    doc = {"job_tolerance": JOB_TOLERANCE, "avg_tolerance": AVG_TOLERANCE,
           "runs": dict(sorted(runs.items()))}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


# ============================================================================ main
def parse_assignments(items: Sequence[str]) -> dict[str, object]:
    """``KEY=VALUE`` items; a value is JSON (numbers, true/false, null, lists) or a string."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"expected KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def any_trace(artifact_name: str, trace: str, policies: Sequence[str], out_format: str) -> int:
    """``--trace``: our policies in the artifact's profile on a trace file of its format."""
    from slurm_sched.sim.report import format_table, to_json

    artifact = ARTIFACTS[artifact_name]
    jobs = read_trace(Path(trace))
    rows = [run(artifact, jobs, row, "artifact").metrics.model_copy(update={"policy": row})
            for row in policies]
    print(to_json(rows) if out_format == "json" else format_table(rows))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=",".join(ARTIFACTS),
                    help="comma-separated: " + ", ".join(ARTIFACTS))
    ap.add_argument("--policies", default=None, help="only these rows (comma-separated)")
    ap.add_argument("--traces", default=None, help="only these traces (comma-separated)")
    ap.add_argument("--profiles", default=",".join(PROFILES),
                    help="artifact, default or both (comma-separated)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--force", action="store_true", help="re-run runs already in the JSON")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--artifact", choices=list(ARTIFACTS),
                    help="with --trace: run a trace file in this artifact's profile")
    ap.add_argument("--trace", help="a trace file in the artifact's format (with --artifact)")
    ap.add_argument("--format", choices=["table", "json"], default="table")
    ap.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                    help="diagnosis: a policy option over the profile's (JSON value or string); "
                         "results are printed, not saved")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="diagnosis: replace a field of the artifact profile, e.g. "
                         "--set round_s=null; results are printed, not saved")
    ap.add_argument("--dump", type=Path, metavar="DIR",
                    help="write DIR/<artifact>_<trace>_<policy>_<profile>.csv per run "
                         "(runs it even if it is in the JSON)")
    args = ap.parse_args(argv)
    change = Change(parse_assignments(args.option), parse_assignments(args.set))

    if args.trace or args.artifact:
        if not (args.trace and args.artifact and args.policies):
            ap.error("--trace needs --artifact and --policies")
        return any_trace(args.artifact, args.trace, args.policies.split(","), args.format)

    runs = load(args.out)
    if not args.report_only:
        wanted = set(args.policies.split(",")) if args.policies else None
        traces = set(args.traces.split(",")) if args.traces else None
        profiles = args.profiles.split(",")
        todo = [(ARTIFACTS[a], p, prof) for a in args.artifacts.split(",")
                for p in ARTIFACTS[a].pairs()
                if (wanted is None or p.policy in wanted) and (traces is None or p.trace in traces)
                for prof in profiles]
        if change:  # a diagnosis: a fresh table, the JSON untouched
            runs = {}
        for i, (artifact, pair, prof) in enumerate(todo, 1):
            key = f"{pair.key}@{prof}"
            if key in runs and not args.force and args.dump is None:
                continue  # a dump needs the run itself
            print(f"[{i}/{len(todo)}] {key} ...", end=" ", file=sys.stderr, flush=True)
            dump = None
            if args.dump is not None:
                args.dump.mkdir(parents=True, exist_ok=True)
                dump = args.dump / f"{key.replace('/', '_').replace('@', '_')}.csv"
            runs[key] = run_pair(artifact, pair, prof, change, dump)
            r = runs[key]
            pj = r.get("per_job")
            print(f"ours {fmt_s(r['avg_jct_s'])} s, theirs {fmt_s(r['theirs_avg_jct_s'])} s, "
                  f"ratio {r['ratio']:.3f}"
                  + (f", jobs within 1%: {pj['end_within_1pct']:.1%} by end, "
                     f"{pj['jct_within_1pct']:.1%} by JCT" if pj else "")
                  + f" ({r['wall_s']} s)", file=sys.stderr, flush=True)
            if not change:
                save(args.out, runs)
    print(summary(runs) + "\n\n" + report(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
