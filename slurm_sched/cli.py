"""``slurm-sched``: the command line (click).

Every bad input ends in one line on stderr, ``error: <file>:<line>: field '<f>' = <value>: <why>``,
and exit code 2; never a traceback.

The root group knows its commands by name (:data:`COMMANDS`) and imports a command's module only
when that command runs, so that ``slurm-sched --help`` starts in a fraction of the time the
policies, pydantic and the numeric libraries take to import.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from slurm_sched import __version__
from slurm_sched.errors import ClusterMisreadError, InputError, SlurmSchedError

log = logging.getLogger("slurm_sched")

EXIT_INPUT = 2
EXIT_FAILURE = 1

#: Every command: name -> (``module:attribute`` of its click command, the first line of its help).
#: ``tests/unit/test_cli.py`` checks that each help line is the command's own.
COMMANDS: dict[str, tuple[str, str]] = {
    "advise": ("slurm_sched.advisor.advise_cli:advise",
               "Replay this cluster's Slurm history under every policy and recommend one."),
    "cluster": ("slurm_sched.slurm.cluster_cli:cluster_cli",
                "A real Slurm cluster on this machine (root; fake GPUs), for tests and demos."),
    "compare": ("slurm_sched.sim.sim_cli:compare",
                "Simulate several policies on the same trace and compare them."),
    "explain": ("slurm_sched.service.tools_cli:explain_cmd",
                "Why a job waits and what it would need (state, queue position, free GPUs, "
                "policy)."),
    "native": ("slurm_sched.native_cli:native",
               "The compiled core (mypyc builds of the hot policy modules; see "
               "slurm_sched.native)."),
    "policies": ("slurm_sched.sim.sim_cli:policies",
                 "List the available policies: name, paper, one line each."),
    "profile": ("slurm_sched.runtime.profile_cli:profile",
                "Measure iteration time vs batch size, memory and interference on this machine."),
    "replay": ("slurm_sched.service.tools_cli:replay_cmd",
               "What a policy would do on a captured state now (and, with --simulate, "
               "afterwards)."),
    "run": ("slurm_sched.service.run_cli:run_cmd",
            "Run the scheduler daemon on the live Slurm cluster (SIGTERM stops it cleanly, "
            "SIGHUP reloads the config)."),
    "simulate": ("slurm_sched.sim.sim_cli:simulate", "Simulate one policy on a trace."),
    "snapshot": ("slurm_sched.service.tools_cli:snapshot_cmd",
                 "Capture the live state (read-only), or what the scheduler would see of a "
                 "cluster recorded in JSON files (--from-json, --nodes), into a snapshot file "
                 "for replay and explain."),
    "sweep": ("slurm_sched.sweep.sweep_cli:sweep",
              "Experiment sweeps: plan, run (locally or as a Slurm job array) and report a grid "
              "of simulations."),
}


def load_command(name: str) -> click.Command:
    """Import and return the click command registered under ``name``."""
    target, _ = COMMANDS[name]
    module, attr = target.split(":")
    command = getattr(importlib.import_module(module), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


class LazyGroup(click.Group):
    """A group whose commands are imported when invoked; ``--help`` lists :data:`COMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(n) for n in COMMANDS)
        rows = [(n, click.Command(n, help=COMMANDS[n][1]).get_short_help_str(limit))
                for n in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="slurm-sched")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """External Slurm scheduler for deep-learning jobs, and its trace-driven simulator."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the CLI and maps errors to exit codes (2 = bad input)."""
    try:
        cli.main(args=argv, prog_name="slurm-sched", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return EXIT_FAILURE
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        return EXIT_INPUT
    except InputError as e:
        click.echo(f"error: {e.one_line()}", err=True)
        return EXIT_INPUT
    except ClusterMisreadError as e:  # a Slurm document we cannot trust, named in one line
        click.echo(f"error: {e}", err=True)
        return EXIT_INPUT
    except SlurmSchedError as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_FAILURE
    return 0


if __name__ == "__main__":
    sys.exit(main())
