"""The HTML report (``--html PATH``): one self-contained page.

The page holds the tables, the notes, the recommendation and four plots as inline SVG (JCT CDF
per schedule, average queueing by job size, GPU utilisation over time, GPU share per account).
It references nothing outside itself: no script, no stylesheet or font file, no URL of any kind
(the SVGs are stripped of their XML namespaces, DOCTYPE and metadata, which name URLs), so it
opens offline and makes no network request. It needs no JavaScript.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurm_sched.advisor import tables
from slurm_sched.advisor.metrics import SIZE_BUCKETS
from slurm_sched.advisor.outcomes import JobOutcome
from slurm_sched.advisor.pipeline import OBSERVED, Advice
from slurm_sched.advisor.report_text import input_lines
from slurm_sched.advisor.tables import Table

#: Bins of the utilisation-over-time plot.
UTIL_BINS = 120
#: Accounts shown in the share plot (the others are summed as "others").
TOP_ACCOUNTS = 12

_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 90%; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.6em; }
td { text-align: right; } td:first-child, th:first-child { text-align: left; }
th { background: #eee; }
.rec { font-size: 120%; padding: 0.8em; border: 2px solid #2a6; background: #efe; }
.stay { border-color: #888; background: #f4f4f4; }
figure { display: inline-block; margin: 0 1em 1em 0; vertical-align: top; }
"""


def _series(advice: Advice) -> dict[str, Sequence[JobOutcome]]:
    """Each schedule's outcomes: observed first, then the policies that ran."""
    out: dict[str, Sequence[JobOutcome]] = {OBSERVED: advice.observed}
    out.update({n: r.outcomes for n, r in advice.runs.items() if r.ok})
    return out


def _utilisation(outcomes: Sequence[JobOutcome], edges: Any, total_gpus: int) -> Any:
    """Busy GPUs / cluster GPUs per bin; a job's GPU-seconds are spread evenly between its first
    start and its end (exact for a job never preempted)."""
    import numpy as np

    busy = np.zeros(len(edges) - 1)
    for o in outcomes:
        if o.end_s <= o.start_s:
            continue
        rate = o.gpu_s / (o.end_s - o.start_s)
        lo = np.clip(edges[:-1], o.start_s, o.end_s)
        hi = np.clip(edges[1:], o.start_s, o.end_s)
        busy += rate * (hi - lo)
    width = edges[1] - edges[0]
    return busy / (width * max(total_gpus, 1))


def _svg(fig: Any, prefix: str) -> str:
    """A figure as an inline ``<svg>`` element with nothing that names a URL, its ids prefixed
    with ``prefix`` so that several SVGs share a page."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    ids = set(re.findall(r'\sid="([^"]+)"', text))
    text = re.sub(r'(\sid=")([^"]+)"',
                  lambda m: f'{m[1]}{prefix}-{m[2]}"' if m[2] in ids else m[0], text)
    text = re.sub(r"#([\w.-]+)", lambda m: f"#{prefix}-{m[1]}" if m[1] in ids else m[0], text)
    return text


def plots(advice: Advice) -> list[tuple[str, str]]:
    """The four plots as (caption, inline SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    series = _series(advice)
    total = advice.shape.cluster.total_gpus
    out: list[tuple[str, str]] = []
    with matplotlib.rc_context({"svg.hashsalt": "slurm-sched-advise", "svg.fonttype": "none"}):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for name, os_ in series.items():
            jct_h = np.sort([max(o.jct_s, 1.0) / 3600.0 for o in os_])
            if len(jct_h):
                ax.step(jct_h, np.arange(1, len(jct_h) + 1) / len(jct_h), where="post",
                        label=name, linestyle="--" if name == OBSERVED else "-")
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (hours, log scale)")
        ax.set_ylabel("fraction of jobs")
        ax.set_ylim(0, 1)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        out.append(("JCT CDF per schedule", _svg(fig, "p1")))
        plt.close(fig)

        labels = [b for b, _, _ in SIZE_BUCKETS if b in advice.rows[0].by_size]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        width = 0.8 / max(len(advice.rows), 1)
        for i, row in enumerate(advice.rows):
            vals = [row.by_size[b].queue.avg_s / 3600.0 if b in row.by_size else 0.0
                    for b in labels]
            ax.bar(np.arange(len(labels)) + i * width, vals, width, label=row.name)
        ax.set_xticks(np.arange(len(labels)) + width * (len(advice.rows) - 1) / 2)
        ax.set_xticklabels([f"{b} GPU" for b in labels])
        ax.set_ylabel("average queueing (hours)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        out.append(("Average queueing by job size", _svg(fig, "p2")))
        plt.close(fig)

        end = max((o.end_s for os_ in series.values() for o in os_), default=1.0)
        edges = np.linspace(0.0, max(end, 1.0), UTIL_BINS + 1)
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for name, os_ in series.items():
            ax.plot(edges[:-1] / 86400.0, _utilisation(os_, edges, total), label=name,
                    linestyle="--" if name == OBSERVED else "-", linewidth=1)
        ax.set_xlabel("days since the first submit")
        ax.set_ylabel("busy GPUs / cluster GPUs")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out.append(("GPU utilisation over time", _svg(fig, "p3")))
        plt.close(fig)

        obs = advice.rows[0].per_account
        ranked = sorted(obs, key=lambda a: -obs[a].gpu_share)
        shown = ranked[:TOP_ACCOUNTS]
        names = shown + (["others"] if len(ranked) > len(shown) else [])
        fig, ax = plt.subplots(figsize=(7, 0.9 + 0.35 * len(names) * max(len(advice.rows), 1)
                                        ** 0.5))
        height = 0.8 / max(len(advice.rows), 1)
        for i, row in enumerate(advice.rows):
            vals = [row.per_account[a].gpu_share if a in row.per_account else 0.0
                    for a in shown]
            if len(names) > len(shown):
                vals.append(sum(m.gpu_share for a, m in row.per_account.items()
                                if a not in shown))
            ax.barh(np.arange(len(names)) + i * height, vals, height, label=row.name)
        ax.set_yticks(np.arange(len(names)) + height * (len(advice.rows) - 1) / 2)
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.set_xlabel("share of GPU-seconds")
        ax.legend(fontsize=8)
        fig.tight_layout()
        out.append(("GPU share per account", _svg(fig, "p4")))
        plt.close(fig)
    return out


def _table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in t.rows)
    return (f"<h3>{html.escape(t.title)}</h3>\n<table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def render(advice: Advice) -> str:
    """The page as a string."""
    rec = advice.recommendation
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>slurm-sched advise</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Scheduling policy advice</h1>",
        f'<p class="rec{"" if rec.policy else " stay"}"><b>Recommendation:</b> '
        f"{html.escape(rec.text)}</p>",
        "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in input_lines(advice))
        + "</ul>",
        "<h2>Plots</h2>",
    ]
    for caption, svg in plots(advice):
        parts.append(f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>")
    if advice.warnings:
        parts.append(f"<h2>Malformed records skipped ({len(advice.warnings)})</h2><ul>"
                     + "".join(f"<li>{html.escape(w)}</li>" for w in tables.warning_lines(advice))
                     + "</ul>")
    parts.append("<h2>Tables</h2>")
    parts += [_table(t) for t in tables.report_tables(advice)]
    notes = tables.policy_notes(advice)
    if notes:
        parts.append("<h2>Notes</h2><ul>"
                     + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write(advice: Advice, path: str | Path) -> Path:
    """Write :func:`render` to ``path`` (its folder is created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render(advice), encoding="utf-8")
    return p
