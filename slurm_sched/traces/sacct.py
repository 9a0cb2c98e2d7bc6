"""Slurm's accounting (``sacct``) as jobs for the simulator: :func:`read_sacct` reads
``sacct --json`` or ``sacct -P`` text into an :class:`Accounting` of :class:`AccountedJob`, and
:func:`sacct_argv` is the command line that writes such a file::

    acct = read_sacct("sacct.txt")      # sacct -X -a -P --format=... > sacct.txt
    jobs = acct.specs()                  # JobSpecs, submit times relative to acct.origin_s

Which records are usable jobs and which are set aside (pending, still running, cancelled before
start, no GPU, ...) is documented in ``docs/accounting-input.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

from slurm_sched.errors import InputError
from slurm_sched.traces._common import read_text
from slurm_sched.traces.sacct_json import read_json
from slurm_sched.traces.sacct_records import AccountedJob, Accounting
from slurm_sched.traces.sacct_text import COLUMNS, read_parsable2

__all__ = ["SACCT_COLUMNS", "AccountedJob", "Accounting", "read_sacct", "sacct_argv"]

#: The columns the text reader needs (``JobIDRaw`` and ``Comment`` optional), in the order
#: :func:`sacct_argv` asks for them.
SACCT_COLUMNS: tuple[str, ...] = COLUMNS

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?)?$")


def read_sacct(path: str | Path) -> Accounting:
    """Detects JSON (`sacct --json`) or `-P`/`--parsable2` text with a header line.

    JSON when the first non-blank character is ``{``, text otherwise. Raises
    :class:`~slurm_sched.errors.TraceFormatError` when the file cannot be read or holds no
    usable job; a malformed record is skipped with one warning in ``Accounting.warnings``.
    """
    p = Path(path)
    text = read_text(p)
    if text.lstrip().startswith("{"):
        return read_json(str(p), text)
    return read_parsable2(str(p), text)


def _starttime(since: str) -> str:
    """``30d`` -> ``now-30days``; an ISO date (``2026-01-01``, ``2026-01-01T08:00``) as is."""
    text = since.strip()
    m = _RELATIVE.match(text)
    if m is not None and int(m.group(1)) > 0:
        return f"now-{int(m.group(1))}{_UNITS[m.group(2)]}"
    if _DATE.match(text):
        return text
    raise InputError(
        "not a start time: expected a span (30d, 12h, 90m, 2w) or a date (2026-01-01)",
        field="since",
        value=since,
    )


def sacct_argv(since: str, *, partition: str | None = None, json: bool = False) -> list[str]:
    """The sacct command line that produces a file read_sacct reads (-X -a, --starttime, ...).

    ``since`` is a span back from now (``30d``, ``12h``, ``90m``, ``2w``, ``3600s``) or an ISO
    date or time (``2026-01-01``, ``2026-01-01T08:00``); ``partition`` limits it to one
    partition (``-r``); ``json`` asks for ``--json`` instead of ``-P --format=...``. Raises
    :class:`~slurm_sched.errors.InputError` for a ``since`` it cannot pass on.
    """
    argv = ["sacct", "-X", "-a"]
    if json:
        argv.append("--json")
    else:
        argv += ["-P", "--format=" + ",".join(SACCT_COLUMNS)]
    argv += ["--starttime", _starttime(since), "--endtime", "now"]
    if partition:
        argv += ["-r", partition]
    return argv
