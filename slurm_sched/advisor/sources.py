"""Where the accounting comes from: a file (``--sacct``) or ``sacct`` run here (``--since``).

The reader itself is passed in (:class:`Reader`: ``slurm_sched.traces.sacct``'s ``read_sacct``
and ``sacct_argv``, wired in :mod:`slurm_sched.advisor.load`), so this module runs with any
reader of the same shape.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from slurm_sched.advisor.records import AccountedJobLike, AccountingLike
from slurm_sched.errors import InputError, SlurmCommandError
from slurm_sched.policy.slurm_backfill import slurm_backfill_options_from_config

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class SacctArgv(Protocol):
    """``sacct_argv``: the sacct command line whose output the reader reads."""

    def __call__(self, since: str, *, partition: str | None = ...,
                 json: bool = ...) -> list[str]: ...


@dataclass(frozen=True)
class Reader:
    """The accounting reader: ``read(path)`` (raises ``TraceFormatError`` on a bad file) and
    ``argv(since, partition=..., json=...)``."""

    read: Callable[[str | Path], AccountingLike]
    argv: SacctArgv


def from_file(reader: Reader, path: str | Path) -> AccountingLike:
    """The accounting of a file ``sacct`` wrote (``--json`` or ``-P`` text)."""
    if not Path(path).is_file():
        raise InputError("no such file", field="--sacct", value=str(path))
    return reader.read(path)


def from_sacct(reader: Reader, since: str, *, partition: str | None = None,
               run: Runner = subprocess.run) -> AccountingLike:
    """Run ``sacct`` (the reader's command line, ``-P`` text: every supported release prints
    it) and read its output.

    Raises:
        InputError: sacct cannot be run here.
        SlurmCommandError: sacct ran and failed (a bad ``since`` included).
    """
    argv = reader.argv(since, partition=partition, json=False)
    try:
        proc = run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(f"cannot run sacct ({e}); give --sacct FILE", field="--since",
                         value=since) from None
    if proc.returncode != 0:
        raise SlurmCommandError(argv, proc.returncode, proc.stderr)
    with tempfile.TemporaryDirectory(prefix="slurm-sched-advise-") as tmp:
        path = Path(tmp) / "sacct.txt"
        path.write_text(proc.stdout)
        return reader.read(path)


def slurm_config(path: str | Path | None, *, live: bool,
                 run: Runner = subprocess.run) -> dict[str, object]:
    """``slurm-backfill``'s options from ``scontrol show config`` text: the file at ``path``,
    else (``live``) ``scontrol show config`` run here, else none (Slurm's defaults).

    Raises:
        InputError: the file cannot be read, scontrol cannot be run, or a value is not one the
            policy reads (the Slurm key and value named).
        SlurmCommandError: scontrol ran and failed.
    """
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror}", field="--slurm-config",
                             value=str(path)) from None
    elif live:
        argv = ["scontrol", "show", "config"]
        try:
            proc = run(argv, capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InputError(f"cannot run scontrol ({e}); give --slurm-config FILE",
                             field="--slurm-config") from None
        if proc.returncode != 0:
            raise SlurmCommandError(argv, proc.returncode, proc.stderr)
        text = proc.stdout
    else:
        return {}
    return slurm_backfill_options_from_config(text)


def in_partition(jobs: Sequence[AccountedJobLike], partition: str | None,
                 ) -> tuple[list[AccountedJobLike], int]:
    """The jobs that ran in ``partition`` (all when None), and how many others were left out.
    A job's partition field may list several (``a,b``) when it was submitted to several."""
    if partition is None:
        return list(jobs), 0
    kept = [j for j in jobs if partition in j.partition.split(",")]
    return kept, len(jobs) - len(kept)
