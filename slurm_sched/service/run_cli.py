"""``slurm-sched run``: start the production daemon (see ``docs/service.md``)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from slurm_sched.service.config import load_config
from slurm_sched.service.daemon import Daemon

DEFAULT_CONFIG = Path("/etc/slurm-sched/config.toml")


@click.command("run")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_CONFIG,
    show_default=True,
    help="TOML config file (docs/service.md); SLURM_SCHED_<FIELD> variables override it.",
)
@click.option(
    "--dry-run",
    "--shadow",
    "dry_run",
    is_flag=True,
    help="Shadow mode: change nothing in Slurm (no starts, no lease renewals); log the scontrol "
    "lines a live daemon would run and compare its placements with Slurm's.",
)
@click.option("--once", is_flag=True, help="Reconcile, run one cycle, exit.")
@click.option(
    "--mini-cluster",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="State dir of a local mini cluster (slurm-sched cluster up): use its Slurm.",
)
def run_cmd(config_path: Path, dry_run: bool, once: bool, mini_cluster: Path | None) -> None:
    """Run the scheduler daemon on the live Slurm cluster (SIGTERM stops it cleanly, SIGHUP
    reloads the config)."""
    cfg = load_config(config_path)
    updates: dict[str, object] = {}
    if dry_run:
        updates["dry_run"] = True
    if mini_cluster is not None:
        updates["mini_cluster"] = mini_cluster.absolute()
    if updates:
        cfg = cfg.model_copy(update=updates)
    pkg = logging.getLogger("slurm_sched")
    level = logging.getLevelName(cfg.observability.log_level)
    pkg.setLevel(min(level, pkg.getEffectiveLevel()))
    daemon = Daemon(cfg, config_path=config_path, once=once)
    daemon.install_signal_handlers()
    code = daemon.run()
    if code:
        raise click.exceptions.Exit(code)
