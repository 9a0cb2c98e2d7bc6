"""Merge a sweep's cell files into one table, CSV/JSON, and figures.

- The per-cell table has one row per result file: the cell's axes, the kept metrics and the
  run time (and, with a baseline, the cell's speed-up: the baseline's ``avg_jct_s`` in the same
  cell but for the policy, over this cell's).
- The summary groups the cells that differ only by seed: mean, and a 95 % Student-t
  confidence interval over the seeds (``mean +- t(0.975, n-1) * s / sqrt(n)``; none for one
  seed).
- Figures (PNG, matplotlib's Agg backend): per trace/cluster/world/overhead, the mean JCT vs
  load per policy with those intervals as error bars (``jct_vs_load_*.png``); per load too, the
  JCT CDF of each policy, every seed's jobs pooled (``jct_cdf_*.png``); with a baseline, each
  cell's speed-up vs load (``speedup_*.png``). A file trace's load is its job count.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scipy import stats

from slurm_sched.errors import InputError
from slurm_sched.sweep.cells import FAILED_DIR, read_result

#: Axes of a cell, in table order; the summary groups over every one but ``seed``.
AXES = ("trace", "load", "cluster", "world", "restart_overhead_s", "policy", "seed")
GROUP = tuple(a for a in AXES if a != "seed")
CONFIDENCE = 0.95


def load_results(out: Path) -> list[dict[str, Any]]:
    """Every complete cell file of ``out`` (failure records and temporary files skipped)."""
    if not out.is_dir():
        raise InputError("no such sweep output folder", field="DIR", value=str(out))
    found = []
    for path in sorted(out.glob("*.json")):
        doc = read_result(path)
        if doc is not None:
            found.append(doc)
    return found


def failures(out: Path) -> list[str]:
    return sorted(p.stem for p in (out / FAILED_DIR).glob("*.json"))


def _axes(doc: dict[str, Any]) -> dict[str, Any]:
    cell = doc["cell"]
    trace = cell["trace"]
    load = trace.get("jobs")
    if load is None:  # a file trace: its job count
        load = doc["metrics"].get("jobs", len(doc.get("jcts_s", [])))
    return {"trace": trace["label"], "load": load, "cluster": cell["cluster"],
            "world": doc.get("world_used", cell["world"]),
            "restart_overhead_s": cell["restart_overhead_s"], "policy": cell["policy"],
            "seed": trace.get("seed")}


def cell_rows(results: Sequence[dict[str, Any]], baseline: str | None = None,
              metric: str = "avg_jct_s") -> list[dict[str, Any]]:
    """One flat row per cell (axes, scalar metrics, run time, speed-up over ``baseline``)."""
    rows = []
    for doc in results:
        row: dict[str, Any] = {"id": doc["id"], **_axes(doc)}
        row.update({k: v for k, v in doc["metrics"].items() if not isinstance(v, dict)})
        row["runtime_s"] = doc["runtime_s"]
        rows.append(row)
    if baseline is not None:
        if not any(r["policy"] == baseline for r in rows):
            known = sorted({r["policy"] for r in rows})
            raise InputError(f"no cell of this policy; policies: {', '.join(known)}",
                             field="--baseline", value=baseline)
        base = {_key(r, "policy"): r.get(metric) for r in rows if r["policy"] == baseline}
        for r in rows:
            b, v = base.get(_key(r, "policy")), r.get(metric)
            r[f"speedup_vs_{baseline}"] = (b / v if isinstance(b, (int, float))
                                           and isinstance(v, (int, float)) and v > 0 else None)
    return rows


def _key(row: dict[str, Any], *leave_out: str) -> tuple[Any, ...]:
    return tuple(row[a] for a in AXES if a not in leave_out)


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half width of the 95 % Student-t interval); the width is NaN for one value."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    t = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1))
    return mean, t * statistics.stdev(values) / math.sqrt(len(values))


def summarize(rows: Sequence[dict[str, Any]], metric: str = "avg_jct_s",
              baseline: str | None = None) -> list[dict[str, Any]]:
    """The cells grouped over seeds: n, mean and CI of ``metric`` (and of the speed-up)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[a] for a in GROUP), []).append(r)
    out = []
    for key, members in sorted(groups.items(), key=lambda kv: tuple(map(_sortable, kv[0]))):
        vals = [float(m[metric]) for m in members if m.get(metric) is not None]
        if not vals:
            continue
        mean, ci = t_interval(vals)
        row: dict[str, Any] = {**dict(zip(GROUP, key, strict=True)), "seeds": len(vals),
                               f"{metric}_mean": mean, f"{metric}_ci95": ci}
        if baseline is not None:
            sp = [m[f"speedup_vs_{baseline}"] for m in members
                  if m.get(f"speedup_vs_{baseline}") is not None]
            if sp:
                row["speedup_mean"], row["speedup_ci95"] = t_interval(sp)
        out.append(row)
    return out


def _sortable(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def format_table(summary: Sequence[dict[str, Any]], metric: str = "avg_jct_s") -> str:
    """A plain-text table of the summary (times in hours when the metric is in seconds)."""
    hours = metric.endswith("_s")
    unit = " (h)" if hours else ""
    scale = 3600.0 if hours else 1.0
    head = ["trace", "load", "cluster", "world", "policy", "seeds", f"{metric}{unit}",
            "+- 95% CI"]
    with_speedup = any("speedup_mean" in r for r in summary)
    if with_speedup:
        head += ["speed-up", "+- 95% CI "]
    lines = [head]
    for r in summary:
        ci = r[f"{metric}_ci95"]
        line = [str(r["trace"]), str(r["load"]), r["cluster"], r["world"], r["policy"],
                str(r["seeds"]), f"{r[f'{metric}_mean'] / scale:.3f}",
                "-" if math.isnan(ci) else f"{ci / scale:.3f}"]
        if with_speedup:
            sp, spci = r.get("speedup_mean"), r.get("speedup_ci95", math.nan)
            line += ["-" if sp is None else f"{sp:.3f}",
                     "-" if sp is None or math.isnan(spci) else f"{spci:.3f}"]
        lines.append(line)
    return aligned(lines)


def aligned(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as left-aligned columns two spaces apart, the first row a header
    underlined with dashes."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    columns: list[str] = []
    for r in rows:
        columns += [k for k in r if k not in columns]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


def write_json(rows: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]],
               path: Path) -> None:
    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "cells": [{k: clean(v) for k, v in r.items()} for r in rows],
        "summary": [{k: clean(v) for k, v in r.items()} for r in summary],
        "confidence_interval": "95% Student-t over seeds",
    }, indent=1) + "\n", encoding="utf-8")


_UNSAFE = re.compile(r"[^A-Za-z0-9.]+")


def _name(*parts: Any) -> str:
    return "_".join(_UNSAFE.sub("-", str(p)).strip("-") for p in parts)


def plot(results: Sequence[dict[str, Any]], plot_dir: Path, baseline: str | None = None,
         metric: str = "avg_jct_s", title: str = "") -> list[Path]:
    """Write the figures (see the module docstring); the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    plot_dir.mkdir(parents=True, exist_ok=True)
    rows = cell_rows(results, baseline, metric)
    summary = summarize(rows, metric, baseline)
    written: list[Path] = []
    scale, unit = (3600.0, " (h)") if metric.endswith("_s") else (1.0, "")
    panels: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for s in summary:
        panels.setdefault((s["trace"], s["cluster"], s["world"], s["restart_overhead_s"]),
                          []).append(s)
    for (trace, cluster, world, overhead), members in panels.items():
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        for policy in dict.fromkeys(m["policy"] for m in members):
            pts = sorted((m["load"], m[f"{metric}_mean"], m[f"{metric}_ci95"])
                         for m in members if m["policy"] == policy)
            x = [p[0] for p in pts]
            y = np.array([p[1] for p in pts]) / scale
            err = np.array([0.0 if math.isnan(p[2]) else p[2] for p in pts]) / scale
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=policy)
        ax.set_xlabel("load (jobs)")
        ax.set_ylabel(f"{metric}{unit}, mean over seeds")
        ax.set_title(f"{title + ': ' if title else ''}{trace} on {cluster}, world {world} "
                     "(95% t-interval)", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        stem = _name(trace, cluster, world, overhead)
        written.append(_save(fig, plot_dir / f"jct_vs_load_{stem}.png"))
        plt.close(fig)
    cdfs: dict[tuple[Any, ...], dict[str, list[float]]] = {}
    for doc in results:
        a = _axes(doc)
        key = (a["trace"], a["load"], a["cluster"], a["world"], a["restart_overhead_s"])
        cdfs.setdefault(key, {}).setdefault(a["policy"], []).extend(doc.get("jcts_s", []))
    for (trace, load, cluster, world, overhead), by_policy in cdfs.items():
        if not any(by_policy.values()):
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        for policy, jcts in by_policy.items():
            jct_h = np.sort(np.array(jcts)) / 3600.0
            if len(jct_h) == 0:
                continue
            ax.step(jct_h, np.arange(1, len(jct_h) + 1) / len(jct_h), where="post",
                    label=f"{policy} (avg {jct_h.mean():.2f} h)")
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (hours, log scale)")
        ax.set_ylabel("fraction of jobs (all seeds)")
        ax.set_ylim(0, 1.0)
        ax.set_title(f"{trace}, load {load}, {cluster}, world {world}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        stem = _name(trace, load, cluster, world, overhead)
        written.append(_save(fig, plot_dir / f"jct_cdf_{stem}.png"))
        plt.close(fig)
    if baseline is not None:
        col = f"speedup_vs_{baseline}"
        spanels: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for r in rows:
            if r.get(col) is not None and r["policy"] != baseline:
                spanels.setdefault((r["trace"], r["cluster"], r["world"],
                                    r["restart_overhead_s"]), []).append(r)
        for (trace, cluster, world, overhead), members in spanels.items():
            fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
            for policy in dict.fromkeys(m["policy"] for m in members):
                mine = [m for m in members if m["policy"] == policy]
                line = ax.plot([m["load"] for m in mine], [m[col] for m in mine], "o",
                               alpha=0.5, label=policy)[0]
                loads = sorted({m["load"] for m in mine})
                means = [statistics.fmean(m[col] for m in mine if m["load"] == n)
                         for n in loads]
                ax.plot(loads, means, "-", color=line.get_color())
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xlabel("load (jobs)")
            ax.set_ylabel(f"{baseline} {metric} / policy {metric} (per cell)")
            ax.set_title(f"speed-up over {baseline}: {trace} on {cluster}, world {world} "
                         "(dots: cells, line: mean over seeds)", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
            stem = _name(baseline, trace, cluster, world, overhead)
            written.append(_save(fig, plot_dir / f"speedup_{stem}.png"))
            plt.close(fig)
    return written


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    return path
