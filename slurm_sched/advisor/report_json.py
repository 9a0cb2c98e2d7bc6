"""The machine-readable report (``--format json``). Schema, version :data:`VERSION`:

``schema`` ("slurm-sched-advise"), ``version``;
``input``: ``source``, ``format``, ``partition``, ``jobs``, ``set_aside`` (reason -> count),
``warnings`` (count), ``warning_messages`` (each: file, line, field and value),
``first_submit_s`` (epoch; the time 0 of every other time);
``cluster``: ``nodes``, ``gpus``, ``gpu_types``, ``source``;
``baseline``;
``policies``: one object per replayed policy: ``name``, ``ok``, ``error`` (null when ok),
``clairvoyant``, ``rejected_jobs``, ``notes``;
``rows``: the observed schedule first, then one per policy that ran: ``name``, ``kind``
("observed" or "simulated"), ``jobs``, ``jct_s`` and ``queue_s`` (each ``avg``, ``median``,
``p99``), ``mean_slowdown``, ``utilisation``, ``span_s``, ``per_account`` (account ->
``jobs``, ``gpu_share``, ``mean_slowdown``), ``by_size`` (bucket "1", "2-4", "5-8", ">8" ->
``jobs``, ``jct_s``, ``queue_s``, ``mean_slowdown``);
``validation`` (null when the baseline did not run): ``policy``, ``jobs``, ``mean_abs_s``,
``median_s``, ``p90_abs_s``, ``within_share``, ``tolerance_s``, ``per_job`` (one object per
job: ``job_id``, ``observed_start_s``, ``simulated_start_s``, ``difference_s``);
``resampling`` (null likewise): ``block``, ``resamples``, ``seed``, ``blocks``, ``jobs``,
``confidence``, ``policies`` (name -> ``avg_jct_s``, ``win_share`` (null: clairvoyant),
``beat_share``, ``improvement_median``, ``improvement_p5``, ``improvement_p95``), ``notes``;
``recommendation``: ``policy`` (null: stay with Slurm's own scheduling), ``win_share``,
``beat_share``, ``text``;
``notes``: general notes.

A field is added with the same version; a field renamed or removed raises the version.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from slurm_sched.advisor.metrics import Distribution, ScheduleMetrics
from slurm_sched.advisor.pipeline import Advice
from slurm_sched.advisor.resample import CONFIDENCE

SCHEMA = "slurm-sched-advise"
VERSION = 1


def _dist(d: Distribution) -> dict[str, float]:
    return {"avg": d.avg_s, "median": d.median_s, "p99": d.p99_s}


def _row(r: ScheduleMetrics) -> dict[str, Any]:
    return {
        "name": r.name, "kind": r.kind, "jobs": r.jobs, "jct_s": _dist(r.jct),
        "queue_s": _dist(r.queue), "mean_slowdown": r.mean_slowdown,
        "utilisation": r.utilisation, "span_s": r.span_s,
        "per_account": {a: asdict(m) for a, m in r.per_account.items()},
        "by_size": {b: {"jobs": g.jobs, "jct_s": _dist(g.jct), "queue_s": _dist(g.queue),
                        "mean_slowdown": g.mean_slowdown} for b, g in r.by_size.items()},
    }


def _start_differences(advice: Advice) -> list[dict[str, Any]]:
    """Per job the baseline ran: its observed and simulated start (s since the first submit)
    and the difference, simulated - observed."""
    run = advice.runs.get(advice.baseline)
    simulated = {o.job_id: o.start_s for o in run.outcomes} if run is not None else {}
    return [{"job_id": o.job_id, "observed_start_s": o.start_s,
             "simulated_start_s": simulated[o.job_id],
             "difference_s": simulated[o.job_id] - o.start_s}
            for o in advice.observed if o.job_id in simulated]


def to_dict(advice: Advice) -> dict[str, Any]:
    """The report as plain JSON data (see the module docstring)."""
    c = advice.shape.cluster
    rs = advice.resampling
    rec = advice.recommendation
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "input": {"source": advice.source, "format": advice.input_format,
                  "partition": advice.partition, "jobs": advice.jobs,
                  "set_aside": dict(advice.set_aside), "warnings": len(advice.warnings),
                  "warning_messages": list(advice.warnings),
                  "first_submit_s": advice.origin_s},
        "cluster": {"nodes": len(c.nodes), "gpus": c.total_gpus,
                    "gpu_types": list(c.gpu_types), "source": advice.shape.source},
        "baseline": advice.baseline,
        "policies": [{"name": r.name, "ok": r.ok, "error": r.error,
                      "clairvoyant": r.clairvoyant, "rejected_jobs": r.rejected,
                      "notes": list(r.notes)} for r in advice.runs.values()],
        "rows": [_row(r) for r in advice.rows],
        "validation": None if advice.validation is None else {
            **asdict(advice.validation), "per_job": _start_differences(advice)},
        "resampling": None if rs is None else {
            "block": rs.block, "resamples": rs.resamples, "seed": rs.seed, "blocks": rs.blocks,
            "jobs": rs.jobs, "confidence": CONFIDENCE,
            "policies": {p: {k: v for k, v in asdict(o).items() if k != "policy"}
                         for p, o in rs.odds.items()},
            "notes": list(rs.notes)},
        "recommendation": {"policy": rec.policy, "win_share": rec.win_share,
                           "beat_share": rec.beat_share, "text": rec.text},
        "notes": list(advice.notes),
    }


def render(advice: Advice) -> str:
    """:func:`to_dict` as indented JSON."""
    return json.dumps(to_dict(advice), indent=2)
