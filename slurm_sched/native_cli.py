"""``slurm-sched native``: build and inspect the compiled core (:mod:`slurm_sched.native`)."""

from __future__ import annotations

import click

from slurm_sched import native as nat


@click.group()
def native() -> None:
    """The compiled core (mypyc builds of the hot policy modules; see slurm_sched.native)."""


@native.command("build")
def native_build() -> None:
    """Compile the hot modules; later imports use the build while it matches the source."""
    try:
        built = nat.build()
    except nat.NativeBuildError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"built {', '.join(sorted(built))} into {nat.NATIVE_DIR}")


@native.command("status")
def native_status() -> None:
    """Per compiled module: whether it runs compiled in this environment, and if not why."""
    for name, state in nat.status().items():
        click.echo(f"{name}: {state}")
