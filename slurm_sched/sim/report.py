"""Human-readable and machine-readable results: the comparison table, JSON, and a JCT CDF plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from slurm_sched.model import CompletedJob
from slurm_sched.sim.metrics import RunMetrics

_COLUMNS = [
    ("policy", "policy", "{}"),
    ("jobs", "jobs", "{}"),
    ("avg JCT (h)", "avg_jct_s", "{:.3f}"),
    ("median JCT (h)", "median_jct_s", "{:.3f}"),
    ("p99 JCT (h)", "p99_jct_s", "{:.3f}"),
    ("avg queue (h)", "avg_queue_s", "{:.3f}"),
    ("makespan (h)", "makespan_s", "{:.2f}"),
    ("GPU util", "gpu_util", "{:.1%}"),
    ("lower bound (h)", "lower_bound_jct_s", "{:.3f}"),
    ("preemptions", "preemptions", "{}"),
]


def format_table(rows: Sequence[RunMetrics]) -> str:
    """A plain-text table, times in hours."""
    cells = [[h for h, _, _ in _COLUMNS]]
    for r in rows:
        line = []
        for _, key, fmt in _COLUMNS:
            v = getattr(r, key)
            if key.endswith("_s"):
                v = v / 3600.0
            line.append(fmt.format(v))
        cells.append(line)
    widths = [max(len(row[i]) for row in cells) for i in range(len(_COLUMNS))]
    out = []
    for n, row in enumerate(cells):
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                             enumerate(zip(row, widths, strict=True))))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    rejected = sum(r.rejected_jobs for r in rows)
    if rejected:
        out.append(f"note: {rejected} job(s) could never fit the cluster and were not run "
                   "(see the warnings above)")
    return "\n".join(out)


def to_json(rows: Sequence[RunMetrics]) -> str:
    return json.dumps([r.model_dump() for r in rows], indent=2)


def plot_jct_cdf(
    results: dict[str, Sequence[CompletedJob]], path: str | Path, title: str = ""
) -> Path:
    """Write a PNG with one JCT CDF curve per policy (log-scale hours)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    path = Path(path)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for name, completed in results.items():
        jct_h = np.sort([c.jct_s / 3600.0 for c in completed])
        if len(jct_h) == 0:
            continue
        y = np.arange(1, len(jct_h) + 1) / len(jct_h)
        ax.step(jct_h, y, where="post", label=f"{name} (avg {jct_h.mean():.2f} h)")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
