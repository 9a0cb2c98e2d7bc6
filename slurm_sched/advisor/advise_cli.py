"""``slurm-sched advise``: the command. Loaded by :mod:`slurm_sched.cli` only when it runs.

Exit codes: 0 with the report; 2 with one line on stderr for bad input (a missing or unreadable
file, both or neither of ``--sacct``/``--since``, an unknown policy, a bad ``--cluster``).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from slurm_sched.advisor import report_html, report_json, report_text
from slurm_sched.advisor.cluster_shape import cluster_shape
from slurm_sched.advisor.load import READER
from slurm_sched.advisor.pipeline import advise as run_advice
from slurm_sched.advisor.records import AccountingLike
from slurm_sched.advisor.replay import BASELINE, default_policies, validate_names
from slurm_sched.advisor.resample import BLOCKS
from slurm_sched.advisor.sources import Reader, from_file, from_sacct, slurm_config
from slurm_sched.errors import InputError


def reader() -> Reader:
    """The accounting reader (:mod:`slurm_sched.advisor.load`; tests put a double here)."""
    return READER


class _Bars:
    """One click progress bar on stderr per phase (a policy's replay, the resampling)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.label = ""
        self.shown = 0

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if label != self.label:
            self.close()
            self.label = label
            self.bar = click.progressbar(length=total, label=label.ljust(24), file=sys.stderr,
                                         show_pos=True)
            self.bar.__enter__()
            self.shown = 0
        self.bar.update(done - self.shown)
        self.shown = done
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
        self.label = ""


def _policy_list(value: str | None, baseline: str) -> list[str]:
    if value is None:
        return default_policies(baseline)
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise InputError("no policy given", field="--policies", value=value)
    return names


@click.command()
@click.option("--sacct", "sacct_path", type=click.Path(exists=True, dir_okay=False),
              default=None,
              help="Slurm accounting file: `sacct --json` or `sacct -P` text (see "
                   "docs/advisor.md for the command).")
@click.option("--since", default=None,
              help="Run sacct here for this period instead, e.g. 30d.")
@click.option("--nodes", "nodes_path", type=click.Path(exists=True, dir_okay=False),
              default=None,
              help="The cluster from a `sinfo --json` file (default: run sinfo here).")
@click.option("--cluster", "cluster_spec", default=None,
              help="The cluster as NxG[:type][,...], e.g. 16x4:a100; overrides --nodes.")
@click.option("--partition", default=None,
              help="Only this partition's nodes and jobs (default: all).")
@click.option("--policies", default=None,
              help="Comma-separated policies to compare (default: the plain-GPU-job policies; "
                   "see docs/advisor.md).")
@click.option("--baseline", default=BASELINE, show_default=True,
              help="The policy that stands for Slurm's own scheduling.")
@click.option("--slurm-config", "slurm_config_path", type=click.Path(dir_okay=False),
              default=None,
              help="`scontrol show config` output: slurm-backfill's priority weights and "
                   "backfill settings (default with --since: run it here; else Slurm's "
                   "defaults).")
@click.option("--format", "out_format", type=click.Choice(["table", "json"]),
              default="table", show_default=True)
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Also write a self-contained HTML report (plots and tables) here.")
@click.option("--resamples", type=click.IntRange(min=1), default=200, show_default=True,
              help="Bootstrap resamples of the history.")
@click.option("--seed", type=int, default=0, show_default=True, help="Resampling seed.")
@click.option("--block", type=click.Choice(BLOCKS), default="day", show_default=True,
              help="Resample whole days or weeks.")
@click.option("--quiet", is_flag=True, help="No progress output.")
def advise(sacct_path: str | None, since: str | None, nodes_path: str | None,
           cluster_spec: str | None, partition: str | None, policies: str | None,
           baseline: str, slurm_config_path: str | None, out_format: str,
           html_path: str | None, resamples: int, seed: int, block: str, quiet: bool) -> None:
    """Replay this cluster's Slurm history under every policy and recommend one.

    Reads the accounting (--sacct FILE, or --since to run sacct here), replays its jobs in the
    simulator under Slurm's own scheduling (the baseline) and each policy, measures how closely
    the baseline reproduces the observed history, and resamples days of history to say how
    often each policy would have won.
    """
    if (sacct_path is None) == (since is None):
        raise InputError("give exactly one of --sacct FILE and --since PERIOD",
                         field="--sacct/--since")
    names = validate_names([baseline, *_policy_list(policies, baseline)])
    shape = cluster_shape(spec=cluster_spec, nodes_path=nodes_path, partition=partition)
    backfill = slurm_config(slurm_config_path, live=since is not None)
    if not quiet:
        click.echo(f"reading {sacct_path or f'sacct --starttime (since {since})'}", err=True)
    accounting: AccountingLike = (from_file(reader(), sacct_path) if sacct_path is not None
                                  else from_sacct(reader(), str(since), partition=partition))
    for message in accounting.warnings:  # one per malformed record, --quiet or not
        click.echo(f"warning: {message}", err=True)
    bars = _Bars(enabled=not quiet)
    advice = run_advice(
        accounting, shape, policies=names, baseline=baseline, partition=partition,
        resamples=resamples, seed=seed, block=block, options={"slurm-backfill": backfill},
        on_replay=lambda name, done, total: bars(f"replay {name}", done, total),
        on_resample=lambda done, total: bars("resampling", done, total),
    )
    bars.close()
    where = (slurm_config_path if slurm_config_path is not None
             else "scontrol show config" if since is not None else None)
    advice.notes.append(
        f"slurm-backfill ran with the settings of {where}: "
        + (", ".join(f"{k}={v}" for k, v in sorted(backfill.items())) or "Slurm's defaults")
        if where is not None
        else "slurm-backfill ran with Slurm's default priority and backfill settings (give "
             "--slurm-config with the output of `scontrol show config` for the site's own)"
    )
    click.echo(report_json.render(advice) if out_format == "json"
               else report_text.render(advice), nl=out_format == "json")
    if html_path is not None:
        out = report_html.write(advice, html_path)
        if not quiet:
            click.echo(f"HTML report written to {out}", err=True)
