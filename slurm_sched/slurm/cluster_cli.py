"""``slurm-sched cluster up|down|status|env``: the local Slurm mini cluster from the CLI."""

from __future__ import annotations

import json

import click

from slurm_sched.slurm.cluster import MiniCluster, MiniClusterError


@click.group("cluster")
@click.option(
    "--state-dir",
    envvar="MINI_SLURM_STATE",
    type=click.Path(file_okay=False),
    default=None,
    help="State dir of the cluster [default: /tmp/slurm-sched-cluster].",
)
@click.pass_context
def cluster_cli(ctx: click.Context, state_dir: str | None) -> None:
    """A real Slurm cluster on this machine (root; fake GPUs), for tests and demos.

    Topology and ports come from the MINI_SLURM_* variables described in cluster.sh.
    """
    ctx.obj = MiniCluster(state_dir)


@cluster_cli.command("up")
@click.option(
    "--slurm",
    "prefix",
    envvar="MINI_SLURM_PREFIX",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Run the Slurm installed under this prefix (scripts/slurm-build.sh prints one) "
    "instead of the apt packages.",
)
@click.pass_obj
def up_cmd(cluster: MiniCluster, prefix: str | None) -> None:
    """Start the cluster (no-op when it already runs) and print its env file."""
    if prefix:
        cluster = MiniCluster(cluster.state_dir, slurm_prefix=prefix)
    try:
        took_s = cluster.up()
    except MiniClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(cluster.env_file.read_text(), nl=False)
    click.echo(f"# cluster up after {took_s:.1f}s; use: source {cluster.env_file}", err=True)


@cluster_cli.command("down")
@click.option("--purge", is_flag=True, help="Also delete the state dir.")
@click.pass_obj
def down_cmd(cluster: MiniCluster, purge: bool) -> None:
    """Cancel all jobs and stop the daemons."""
    try:
        cluster.down(purge=purge)
    except MiniClusterError as exc:
        raise click.ClickException(str(exc)) from exc


@cluster_cli.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_obj
def status_cmd(cluster: MiniCluster, as_json: bool) -> None:
    """Show daemons and nodes; exit 3 when the cluster is not (fully) up."""
    status = cluster.status()
    if as_json:
        click.echo(json.dumps(status, indent=2))
    else:
        click.echo(f"state dir: {status['state_dir']}  up: {'yes' if status['up'] else 'no'}")
        for name, pid in status["daemons"].items():
            click.echo(f"  {name}: {'pid ' + str(pid) if pid else 'not running'}")
        for node in status["nodes"]:
            parts = ",".join(node["partitions"] or [])
            click.echo(f"  node {node['name']}: {node['state']} [{parts}] {node['gres']}")
        if status["up"]:
            click.echo(f"export SLURM_CONF={status['slurm_conf']}")
    if not status["up"]:
        raise SystemExit(3)


@cluster_cli.command("env")
@click.pass_obj
def env_cmd(cluster: MiniCluster) -> None:
    """Print the env file, for ``eval "$(slurm-sched cluster env)"``."""
    if not cluster.env_file.exists():
        raise click.ClickException(f"no cluster at {cluster.state_dir}")
    click.echo(cluster.env_file.read_text(), nl=False)
