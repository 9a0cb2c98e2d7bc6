"""``slurm-sched sweep``: plan, run and report a grid of simulations (``docs/sweeps.md``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from slurm_sched.errors import InputError, SlurmSchedError
from slurm_sched.sweep import calibrate, report
from slurm_sched.sweep.cells import Cell, cell_id
from slurm_sched.sweep.grid import load_and_expand
from slurm_sched.sweep.run_local import Progress, RunSummary, run_cells
from slurm_sched.sweep.run_slurm import SlurmOptions, chunk_cells, submit_and_wait


@click.group()
def sweep() -> None:
    """Experiment sweeps: plan, run (locally or as a Slurm job array) and report a grid of
    simulations.

    A grid file (TOML) lists traces, loads, seeds, clusters, policies with options, worlds and
    restart overheads; every combination is a cell, and each cell's result is one JSON file."""


def _fmt_s(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def _plan_table(cells: tuple[Cell, ...], est: calibrate.Estimate | None,
                counts: dict[int, int]) -> str:
    head = ["#", "cell", "trace", "load", "seed", "cluster", "policy", "world", "overhead_s",
            "jobs"] + (["est"] if est else [])
    rows = [head]
    for i, c in enumerate(cells):
        row = [str(i), cell_id(c), c.trace_label, "-" if c.load is None else str(c.load),
               "-" if c.seed is None else str(c.seed), c.cluster, c.policy, c.world,
               f"{c.restart_overhead_s:g}", str(counts[i])]
        if est:
            row.append(_fmt_s(est.per_cell_s[i]))
        rows.append(row)
    return report.aligned(rows)


@sweep.command()
@click.argument("grid", type=click.Path(dir_okay=False))
@click.option("--calibrate-jobs", type=click.IntRange(min=1),
              default=calibrate.DEFAULT_CALIBRATION_JOBS, show_default=True,
              help="Jobs of the truncated run that times each policy.")
@click.option("--no-calibrate", is_flag=True, help="List the cells only; no timing run.")
@click.option("-j", "--jobs", "workers", type=click.IntRange(min=1), default=1,
              show_default=True, help="Worker processes the wall-time estimate assumes.")
def plan(grid: str, calibrate_jobs: int, no_calibrate: bool, workers: int) -> None:
    """Validate a grid and print its cells and an estimate of their cost."""
    g, cells = load_and_expand(grid)
    axes = (f"{len(g.traces)} trace(s) x loads x {len(g.seeds)} seed(s) x "
            f"{len(g.clusters)} cluster(s) x {len(g.policies)} policy(ies) x "
            f"{len(g.worlds)} world(s) x {len(g.restart_overheads_s)} overhead(s)")
    click.echo(f"grid {g.name}: {len(cells)} cells ({axes}; less exclusions)")
    est = None if no_calibrate else calibrate.estimate(cells, calibrate_jobs)
    counts = est.jobs if est else calibrate.job_counts(cells)
    click.echo(_plan_table(cells, est, counts))
    if est:
        click.echo(f"estimate: {_fmt_s(est.total_s)} of CPU in all, about "
                   f"{_fmt_s(est.wall_s(workers))} with -j {workers}")
        click.echo("how: " + calibrate.METHOD.format(k=est.k) + "; seconds per job: " +
                   ", ".join(f"{p} {r * 1000:.2f} ms" for p, r in est.seconds_per_job.items())
                   + f" (calibration took {_fmt_s(est.calibration_s)})")


def _finish(out: Path, summary: RunSummary) -> None:
    click.echo(f"{summary.ran} cell(s) run, {summary.skipped} already done, "
               f"{len(summary.failed)} failed, of {summary.total}; results in {out}", err=True)
    if summary.failed:
        raise SlurmSchedError(
            f"{len(summary.failed)} cell(s) failed twice, e.g. {summary.failed[0]}: "
            f"see {out / 'failed'}")


@sweep.command()
@click.argument("grid", type=click.Path(dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Folder of the cell files (created; a rerun skips the cells done).")
@click.option("-j", "--jobs", "workers", type=click.IntRange(min=1), default=1,
              show_default=True, help="Worker processes (local runs).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--slurm", is_flag=True, help="Run the missing cells as one Slurm job array.")
@click.option("--partition", default=None, help="--slurm: the partition of the array.")
@click.option("--array-limit", type=click.IntRange(min=1), default=None,
              help="--slurm: at most N tasks at once (sbatch --array=...%N).")
@click.option("--time", "time_limit", default=None, help="--slurm: each task's time limit.")
@click.option("--chunks", type=click.IntRange(min=1), default=None,
              help="--slurm: array tasks (default one per missing cell, at most 1000).")
@click.option("--poll-s", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="--slurm: seconds between looks at the output folder and squeue.")
@click.option("--no-wait", is_flag=True, help="--slurm: submit and return.")
def run(grid: str, out: str, workers: int, quiet: bool, slurm: bool, partition: str | None,
        array_limit: int | None, time_limit: str | None, chunks: int | None, poll_s: float,
        no_wait: bool) -> None:
    """Run the grid's missing cells, locally in a process pool or as a Slurm job array."""
    _, cells = load_and_expand(grid)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    prog = Progress(len(cells), enabled=not quiet)
    if not slurm:
        if any((partition, array_limit, time_limit, chunks, no_wait)):
            raise InputError("these options need --slurm", field="--slurm", value=None)
        _finish(out_dir, run_cells(cells, out_dir, workers=workers, progress=prog))
        return
    opts = SlurmOptions(partition=partition, array_limit=array_limit, time=time_limit,
                        chunks=chunks, poll_s=poll_s, job_name=f"sweep-{Path(grid).stem}")
    res = submit_and_wait(cells, Path(grid), out_dir, opts, wait=not no_wait, progress=prog)
    if not res.job_ids:
        click.echo(f"every cell is done; results in {out_dir}", err=True)
        return
    click.echo(f"submitted array job(s) {', '.join(res.job_ids)}; manifest {res.manifest}",
               err=True)
    if no_wait:
        return
    if res.failed or res.missing:
        raise SlurmSchedError(
            f"{len(res.failed)} cell(s) failed twice (see {out_dir / 'failed'}) and "
            f"{len(res.missing)} never arrived (logs in {out_dir / '.sweep' / 'logs'})")
    click.echo(f"every cell is done; results in {out_dir}", err=True)


@sweep.command("run-chunk", hidden=True)
@click.argument("grid", type=click.Path(dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False))
@click.option("--chunk", "index", type=click.IntRange(min=0), required=True)
@click.option("--chunks", type=click.IntRange(min=1), required=True)
@click.option("--manifest", type=click.Path(dir_okay=False, exists=True), default=None)
def run_chunk(grid: str, out: str, index: int, chunks: int, manifest: str | None) -> None:
    """One task of a --slurm array: the cells of chunk INDEX that have no result yet."""
    _, cells = load_and_expand(grid)
    try:
        mine = chunk_cells(cells, Path(manifest) if manifest else None, index, chunks)
    except ValueError as e:
        raise InputError(str(e), field="--chunk", value=index) from None
    click.echo(f"chunk {index}/{chunks}: {len(mine)} cell(s)", err=True)
    _finish(Path(out), run_cells(mine, Path(out), workers=1,
                                 progress=Progress(len(mine), enabled=not sys.stderr.isatty())))


@sweep.command("report")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--baseline", default=None, help="Policy label the speed-ups are relative to.")
@click.option("--metric", default="avg_jct_s", show_default=True,
              help="The RunMetrics field of the summary and the figures.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None,
              help="Write every cell as a CSV row here.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write the cells and the summary as JSON here.")
@click.option("--plot-dir", type=click.Path(file_okay=False), default=None,
              help="Write the figures (PNG) into this folder.")
def report_cmd(out: str, baseline: str | None, metric: str, csv_path: str | None,
               json_path: str | None, plot_dir: str | None) -> None:
    """Merge a sweep's cell files into one table (mean and 95% t-interval over seeds)."""
    out_dir = Path(out)
    results = report.load_results(out_dir)
    if not results:
        raise InputError("no complete cell file in this folder", field="DIR", value=out)
    rows = report.cell_rows(results, baseline, metric)
    if not any(metric in r for r in rows):
        raise InputError("no cell kept this metric", field="--metric", value=metric)
    summary = report.summarize(rows, metric, baseline)
    click.echo(report.format_table(summary, metric))
    failed = report.failures(out_dir)
    click.echo(f"{len(results)} cell(s)" + (f"; {len(failed)} failed (see "
                                            f"{out_dir / 'failed'})" if failed else ""))
    if csv_path:
        report.write_csv(rows, Path(csv_path))
    if json_path:
        report.write_json(rows, summary, Path(json_path))
    if plot_dir:
        paths = report.plot(results, Path(plot_dir), baseline, metric)
        click.echo(f"{len(paths)} figure(s) written to {plot_dir}", err=True)
