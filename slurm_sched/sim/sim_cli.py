"""The research commands: ``simulate``, ``compare`` and ``policies``.

Loaded by :mod:`slurm_sched.cli` only when one of them runs.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from slurm_sched import traces
from slurm_sched.cli_options import F, with_options
from slurm_sched.errors import InputError
from slurm_sched.model import Cluster, JobSpec, parse_cluster_spec
from slurm_sched.perf import registry as perf_registry
from slurm_sched.policy import registry
from slurm_sched.sim import profile as profiles
from slurm_sched.sim.report import format_table, plot_jct_cdf, to_json
from slurm_sched.sim.runner import SimulationResult
from slurm_sched.sim.runner import simulate as simulate_run


def _cluster(_ctx: click.Context, _param: click.Parameter, value: str) -> Cluster:
    return parse_cluster_spec(value)


def _policy_names(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise InputError("no policy given", field="policies", value=value)
    for n in names:
        registry.create(n)  # validates the name, one-line error if unknown
    return names


def load_trace(path: str, fmt: str | None, limit: int | None) -> list[JobSpec]:
    """The jobs of a trace file or bundled trace name (``--trace``), the first ``limit`` only
    when given."""
    p = Path(path)
    if not p.exists():
        try:
            p = traces.bundled(path)
        except (InputError, FileNotFoundError, KeyError, ValueError):
            raise InputError("no such file (nor a bundled trace of that name)",
                             field="trace", value=path) from None
    jobs = traces.read_trace(p, fmt)
    if limit is not None:
        jobs = jobs[:limit]
    return jobs


class _Progress:
    """A throttled one-line progress display on stderr (a bar on a terminal)."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self._last = 0.0
        self._t0 = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < (0.2 if self.tty else 5.0):
            return
        self._last = now
        frac = done / total if total else 1.0
        bar = "#" * int(frac * 30)
        msg = (f"{self.label} [{bar:<30}] {done}/{total} jobs done "
               f"({frac:.0%}, {now - self._t0:.0f}s)")
        if self.tty:
            click.echo("\r" + msg, err=True, nl=done >= total)
        else:
            click.echo(msg, err=True)


common_sim_options: list[Callable[[F], F]] = [
    click.option("--trace", "trace", required=True,
                 help="Trace file, or a bundled trace name such as muri/trace1.csv."),
    click.option("--trace-format", "trace_format", default=None,
                 help="Trace format (default: detected from the header)."),
    click.option("--cluster", "cluster", required=True, callback=_cluster,
                 help="Cluster NxG[:type][/Ccpu][/Mgb][,...], e.g. 16x4, 3x8:v100,6x8:p100 or "
                      "8x8:a800/96cpu/1600gb (CPUs and GB per node; default 32 and 256)."),
    click.option("--restart-overhead-s", type=click.FloatRange(min=0), default=None,
                 help="Dead time after a job restarts (preempt/migrate); default: the "
                      "profile's, else 30."),
    click.option("--profile", "profile", default="default", show_default=True,
                 help="Simulation profile: our realistic 'default', or an authors' simulator's "
                      "assumptions (`slurm-sched policies --profiles` lists them)."),
    click.option("--limit", type=click.IntRange(min=1), default=None,
                 help="Use only the first N jobs of the trace."),
    click.option("--progress-model", "progress_model", default=None,
                 help="Simulated world (GPU speeds, interference...): a name from "
                      "slurm_sched.perf; default: the one the policies were evaluated in."),
    click.option("--format", "out_format", type=click.Choice(["table", "json"]),
                 default="table", show_default=True),
    click.option("--quiet", is_flag=True, help="No progress output."),
    click.option("-o", "--option", "policy_options", multiple=True, metavar="KEY=VALUE",
                 help="A policy option (repeatable), e.g. -o round_s=5 or -o tau=0; values are "
                      "JSON (numbers, true/false, lists) or plain strings. With several "
                      "policies it goes to each that takes it; `slurm-sched policies "
                      "--options` lists them."),
]


def parse_policy_options(items: tuple[str, ...], names: list[str]) -> dict[str, dict[str, object]]:
    """``KEY=VALUE`` items -> {policy: {key: value}} for each named policy that takes the key.

    A key that none of ``names`` takes is an :class:`InputError` naming it.
    """
    parsed: dict[str, object] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise InputError("expected KEY=VALUE", field="--option", value=item)
        try:
            parsed[key] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key] = raw
    per_policy: dict[str, dict[str, object]] = {n: {} for n in names}
    for key, value in parsed.items():
        takers = [n for n in names if key in registry.info(n).options]
        if not takers:
            raise InputError(
                f"no policy of {', '.join(names)} takes this option (see `slurm-sched policies "
                "--options`)", field="--option", value=f"{key}={value}")
        for n in takers:
            per_policy[n][key] = value
    return per_policy


def resolve_world(names: list[str], progress_model: str | None,
                  profile: profiles.Profile = profiles.DEFAULT) -> str:
    """One progress model for every policy of a comparison (a fair comparison needs one world):
    ``progress_model`` if given, else the profile's, else the one the policies share."""
    if progress_model is None:
        progress_model = profile.progress_model
    if progress_model is not None:
        perf_registry.create(progress_model)  # validates the name
        return progress_model
    wanted = {w for n in names if (w := registry.create(n).progress_model) is not None}
    if len(wanted) > 1:
        raise InputError(
            f"these policies were evaluated in different worlds ({', '.join(sorted(wanted))}); "
            "choose one with --progress-model", field="policies", value=",".join(names))
    return wanted.pop() if wanted else "identity"


def run_policy(jobs: list[JobSpec], cluster: Cluster, name: str, options: dict[str, object],
               *, restart_overhead_s: float | None, world: str,
               profile: profiles.Profile | str = "default",
               on_progress: Callable[[int, int], None] | None = None) -> SimulationResult:
    """One policy (registry name and options) in the world ``world`` under ``profile``: what
    ``simulate`` and ``compare`` run for each policy, and what ``sweep`` runs for each cell."""
    return simulate_run(jobs, cluster, name, restart_overhead_s=restart_overhead_s,
                        progress_model=world, on_progress=on_progress, profile=profile,
                        policy_options=options)


def _run(jobs: list[JobSpec], cluster: Cluster, names: list[str],
         restart_overhead_s: float | None, quiet: bool, progress_model: str | None = None,
         options: tuple[str, ...] = (), profile_name: str = "default",
         ) -> dict[str, SimulationResult]:
    per_policy = parse_policy_options(options, names)
    profile = profiles.get(profile_name)
    world = resolve_world(names, progress_model, profile)
    results: dict[str, SimulationResult] = {}
    for name in names:
        prog = _Progress(name, enabled=not quiet)
        res = run_policy(jobs, cluster, name, per_policy[name],
                         restart_overhead_s=restart_overhead_s, world=world, profile=profile,
                         on_progress=prog)
        for spec, why in res.rejected[:1]:
            click.echo(f"warning: {len(res.rejected)} job(s) can never fit the cluster and "
                       f"were not run, e.g. {spec.job_id}: {why}", err=True)
        results[name] = res
    return results


def _emit(results: dict[str, SimulationResult], out_format: str) -> None:
    rows = [r.metrics for r in results.values()]
    click.echo(to_json(rows) if out_format == "json" else format_table(rows))


@click.command()
@click.option("--policy", required=True, help="Policy name (see `slurm-sched policies`).")
@with_options(common_sim_options)
def simulate(policy: str, trace: str, trace_format: str | None, cluster: Cluster,
             restart_overhead_s: float | None, profile: str, limit: int | None,
             progress_model: str | None, out_format: str, quiet: bool,
             policy_options: tuple[str, ...]) -> None:
    """Simulate one policy on a trace."""
    names = _policy_names(policy)
    jobs = load_trace(trace, trace_format, limit)
    _emit(_run(jobs, cluster, names[:1], restart_overhead_s, quiet, progress_model,
               policy_options, profile), out_format)


@click.command()
@click.option("--policies", required=True, help="Comma-separated policy names.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Write a JCT CDF plot (PNG) here.")
@with_options(common_sim_options)
def compare(policies: str, plot: str | None, trace: str, trace_format: str | None,
            cluster: Cluster, restart_overhead_s: float | None, profile: str,
            limit: int | None, progress_model: str | None, out_format: str, quiet: bool,
            policy_options: tuple[str, ...]) -> None:
    """Simulate several policies on the same trace and compare them."""
    names = _policy_names(policies)
    jobs = load_trace(trace, trace_format, limit)
    results = _run(jobs, cluster, names, restart_overhead_s, quiet, progress_model,
                   policy_options, profile)
    _emit(results, out_format)
    if plot:
        out = plot_jct_cdf({n: r.completed for n, r in results.items()}, plot,
                           title=f"{Path(trace).name} on {len(cluster.nodes)} nodes, "
                                 f"{cluster.total_gpus} GPUs")
        click.echo(f"plot written to {out}", err=True)


@click.command()
@click.option("--options", "show_options", is_flag=True,
              help="Also list each policy's options (for -o KEY=VALUE).")
@click.option("--profiles", "show_profiles", is_flag=True,
              help="List the simulation profiles (for --profile) instead.")
def policies(show_options: bool, show_profiles: bool) -> None:
    """List the available policies: name, paper, one line each."""
    if show_profiles:
        known = [profiles.get(n) for n in profiles.names()]
        w = max(len(p.name) for p in known)
        for prof in known:
            click.echo(f"{prof.name.ljust(w)}  {prof.summary}")
        return
    infos = registry.available()
    w = max(len(p.name) for p in infos)
    for p in infos:
        oracle = " [uses true durations]" if p.clairvoyant else ""
        click.echo(f"{p.name.ljust(w)}  {p.summary}{oracle}  ({p.paper})")
        if show_options:
            click.echo(f"{'':{w}}  options: {', '.join(p.options) or 'none'}")


