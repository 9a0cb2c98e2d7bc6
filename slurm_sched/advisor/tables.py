"""The report's tables as headers and rows of formatted cells, shared by the text and HTML
reports. Times are shown in hours, shares in percent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slurm_sched.advisor.metrics import SIZE_BUCKETS, ScheduleMetrics
from slurm_sched.advisor.pipeline import Advice


@dataclass(frozen=True)
class Table:
    """A titled table: the first column is a row label, left-aligned; the others are numbers."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def hours(s: float) -> str:
    return f"{s / 3600.0:.2f}"


def pct(x: float) -> str:
    return f"{x:.1%}"


def summary(advice: Advice) -> Table:
    """One row per schedule: JCT, queueing, slowdown, utilisation."""
    rows = tuple(
        (r.name, r.kind, str(r.jobs), hours(r.jct.avg_s), hours(r.jct.median_s),
         hours(r.jct.p99_s), hours(r.queue.avg_s), hours(r.queue.median_s),
         hours(r.queue.p99_s), f"{r.mean_slowdown:.2f}", pct(r.utilisation))
        for r in advice.rows
    )
    return Table("Per schedule (times in hours)",
                 ("policy", "kind", "jobs", "avg JCT", "median JCT", "p99 JCT", "avg queue",
                  "median queue", "p99 queue", "slowdown", "GPU util"), rows)


def _by_size(advice: Advice, title: str, cell: Callable[[ScheduleMetrics, str], str]) -> Table:
    labels = [b for b, _, _ in SIZE_BUCKETS if any(b in r.by_size for r in advice.rows)]
    rows = tuple((r.name, *(cell(r, b) if b in r.by_size else "-" for b in labels))
                 for r in advice.rows)
    return Table(title, ("policy", *(f"{b} GPU" for b in labels)), rows)


def by_size(advice: Advice) -> list[Table]:
    """Average JCT, average queueing and mean slowdown per job size bucket."""
    counts = {b: g.jobs for b, g in advice.rows[0].by_size.items()}
    jobs = ", ".join(f"{b} GPU: {n}" for b, n in counts.items())
    return [
        _by_size(advice, f"Average JCT by job size, hours (jobs: {jobs})",
                 lambda r, b: hours(r.by_size[b].jct.avg_s)),
        _by_size(advice, "Average queueing by job size, hours",
                 lambda r, b: hours(r.by_size[b].queue.avg_s)),
        _by_size(advice, "p99 queueing by job size, hours",
                 lambda r, b: hours(r.by_size[b].queue.p99_s)),
        _by_size(advice, "Mean slowdown (JCT / run time) by job size",
                 lambda r, b: f"{r.by_size[b].mean_slowdown:.2f}"),
    ]


def per_account(advice: Advice) -> Table:
    """Each account's GPU share and mean slowdown under each schedule."""
    accounts = sorted({a for r in advice.rows for a in r.per_account})
    header = ("account", "jobs", *(f"{r.name} share / slowdown" for r in advice.rows))
    obs = advice.rows[0].per_account
    rows = tuple(
        (a, str(obs[a].jobs if a in obs else 0),
         *(f"{pct(r.per_account[a].gpu_share)} / {r.per_account[a].mean_slowdown:.2f}"
           if a in r.per_account else "-" for r in advice.rows))
        for a in accounts
    )
    return Table("Per account: share of GPU-seconds / mean slowdown", header, rows)


def validation(advice: Advice) -> Table | None:
    """The baseline's start times against the observed ones, in minutes."""
    v = advice.validation
    if v is None:
        return None
    rows = (
        ("jobs compared", str(v.jobs)),
        ("mean |simulated - observed start|", f"{v.mean_abs_s / 60:.1f} min"),
        ("median simulated - observed start", f"{v.median_s / 60:+.1f} min"),
        ("p90 |simulated - observed start|", f"{v.p90_abs_s / 60:.1f} min"),
        (f"started within {v.tolerance_s / 60:.0f} min of the observed time",
         pct(v.within_share)),
    )
    return Table(f"How closely {v.policy} reproduces the observed starts", ("", v.policy), rows)


def resampling(advice: Advice) -> Table | None:
    """Per policy: average JCT on the common jobs, win and beat shares, improvement range."""
    rs = advice.resampling
    if rs is None:
        return None
    rows = tuple(
        (o.policy, hours(o.avg_jct_s),
         "n/a" if o.win_share is None else pct(o.win_share),
         "-" if o.policy == rs.baseline else pct(o.beat_share),
         "-" if o.policy == rs.baseline else f"{o.improvement_median:+.1%}",
         "-" if o.policy == rs.baseline
         else f"{o.improvement_p5:+.1%} .. {o.improvement_p95:+.1%}")
        for o in rs.odds.values()
    )
    return Table(
        f"{rs.resamples} resamples of the {rs.blocks} {rs.block}s of history (seed {rs.seed}, "
        f"{rs.jobs} jobs every policy completed)",
        ("policy", "avg JCT (h)", "wins", f"beats {rs.baseline}", "improvement (median)",
         "improvement 5-95%"), rows)


def report_tables(advice: Advice) -> list[Table]:
    """Every table of a report, in the order both renderers show them: the summary, by job
    size, per account, then the simulator check and the resampling when they ran."""
    tables = [summary(advice), *by_size(advice), per_account(advice)]
    tables += [t for t in (validation(advice), resampling(advice)) if t is not None]
    return tables


#: Malformed records listed in the text and HTML reports (all are in the JSON report and on stderr)
SHOWN_WARNINGS = 10


def warning_lines(advice: Advice) -> list[str]:
    """The first malformed records, one line each, and how many more there are ([] for none)."""
    shown = advice.warnings[:SHOWN_WARNINGS]
    more = len(advice.warnings) - len(shown)
    return [*shown, *([f"... and {more} more (all in --format json)"] if more else [])]


def policy_notes(advice: Advice) -> list[str]:
    """One line per failed policy and per note of a policy's run, then the general notes."""
    lines = []
    for name, run in advice.runs.items():
        if run.error is not None:
            lines.append(f"{name}: FAILED on this history: {run.error}")
        lines.extend(f"{name}: {n}" for n in run.notes)
    lines.extend(advice.notes)
    if advice.resampling is not None:
        lines.extend(advice.resampling.notes)
    return lines
