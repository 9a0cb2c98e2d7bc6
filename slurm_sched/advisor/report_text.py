"""The plain-text report ``advise`` prints (``--format table``)."""

from __future__ import annotations

from slurm_sched.advisor import tables
from slurm_sched.advisor.pipeline import Advice
from slurm_sched.advisor.tables import Table


def render_table(t: Table) -> str:
    """``t`` as aligned columns under its title (first column left, the others right)."""
    cells = [t.header, *t.rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(t.header))]
    lines = [t.title]
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def input_lines(advice: Advice) -> list[str]:
    """What was read and replayed on what."""
    aside = ", ".join(f"{why}: {n}" for why, n in advice.set_aside.items()) or "none"
    part = f", partition {advice.partition}" if advice.partition else ""
    return [
        f"Accounting: {advice.source} ({advice.input_format}{part}): {advice.jobs} jobs "
        f"replayed; set aside: {aside}; {len(advice.warnings)} malformed record(s) skipped",
        f"Cluster: {advice.shape.describe()}",
        f"Baseline (Slurm's own scheduling): {advice.baseline}",
    ]


def render(advice: Advice) -> str:
    """The whole report: inputs, malformed records, tables, notes, the simulator check, the
    recommendation."""
    parts = ["\n".join(input_lines(advice))]
    if advice.warnings:
        parts.append(f"Malformed records skipped ({len(advice.warnings)})\n"
                     + "\n".join(f"- {w}" for w in tables.warning_lines(advice)))
    parts += [render_table(t) for t in tables.report_tables(advice)]
    notes = tables.policy_notes(advice)
    if notes:
        parts.append("Notes\n" + "\n".join(f"- {n}" for n in notes))
    parts.append(f"Recommendation: {advice.recommendation.text}")
    return "\n\n".join(parts) + "\n"
