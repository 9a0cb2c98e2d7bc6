"""Trace readers: every supported workload format becomes a list of canonical
:class:`~slurm_sched.model.job.JobSpec`, sorted by submit time (ties keep the file order)::

    jobs = read_trace(bundled("muri/trace1.csv"))   # format detected from the header
    jobs = read_trace("my.csv", fmt="canonical")    # or named explicitly
    write_canonical(jobs, "my.jsonl")               # convert any trace

Formats (``TRACE_FORMATS``): ``canonical`` (our CSV/JSONL, ``docs/trace-format.md``), ``muri``,
``tiresias``, ``philly`` (Pollux's copy of the Philly trace), ``pollux`` (Pollux workloads, with a
derived duration) and ``rubick``. Every reader raises :class:`~slurm_sched.errors.TraceFormatError`
naming the file, line, field and raw value of the first bad input.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from slurm_sched.errors import InputError, TraceFormatError
from slurm_sched.model.job import JobSpec
from slurm_sched.traces import canonical, muri, philly, pollux_workload, rubick, tiresias
from slurm_sched.traces._common import read_text
from slurm_sched.traces.canonical import write_canonical

__all__ = [
    "DATA_DIR",
    "TRACE_FORMATS",
    "TraceReader",
    "bundled",
    "detect_format",
    "read_trace",
    "write_canonical",
]

TraceReader = Callable[[Path], list[JobSpec]]

#: Format name -> reader. Each reader takes a path and returns the jobs sorted by submit time.
TRACE_FORMATS: dict[str, TraceReader] = {
    canonical.NAME: canonical.read,
    muri.NAME: muri.read,
    tiresias.NAME: tiresias.read,
    philly.NAME: philly.read,
    pollux_workload.NAME: pollux_workload.read,
    rubick.NAME: rubick.read,
}

# Detection order matters: a Muri header also contains every Tiresias column.
_SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    (canonical.NAME, canonical.SIGNATURE),
    (muri.NAME, muri.SIGNATURE),
    (tiresias.NAME, tiresias.SIGNATURE),
    (philly.NAME, philly.SIGNATURE),
    (rubick.NAME, rubick.SIGNATURE),
    (pollux_workload.NAME, pollux_workload.SIGNATURE),
)

# When no signature matches fully, a column only one format uses picks it, so that its reader
# can name the missing columns instead of a vague "unknown format".
_HINTS: tuple[tuple[str, frozenset[str]], ...] = (
    (canonical.NAME, frozenset({"submit_time_s", "duration_s", "stage_times_ms"})),
    (muri.NAME, frozenset({"resource_time_0", "resource_time_1", "resource_time_2"})),
    (philly.NAME, frozenset({"timestamp", "gpu_time"})),
    (rubick.NAME, frozenset({"submission_time", "exec_plan", "is_sla", "steps"})),
    (pollux_workload.NAME, frozenset({"num_replicas"})),
)

#: The bundled data files (``slurm_sched/data``); see its ``PROVENANCE.md``.
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def bundled(name: str) -> Path:
    """Path of a bundled data file, e.g. ``bundled("muri/trace1.csv")``."""
    base = DATA_DIR.resolve()
    path = (base / name).resolve()
    if not path.is_relative_to(base) or not path.is_file():
        folders = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
        raise InputError(
            f"no bundled data file {name!r} under {base} (folders: {', '.join(folders)})",
            source=name,
        )
    return path


def _known() -> str:
    return ", ".join(TRACE_FORMATS)


def detect_format(path: str | Path) -> str:
    """Name of the format of ``path``: canonical JSONL by suffix (``.jsonl``, ``.ndjson``,
    ``.json``) or content (a line starting with ``{``), otherwise from the CSV header."""
    p = Path(path)
    text = read_text(p)
    if canonical.is_jsonl(p, text):
        return canonical.NAME
    found = next(((n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()), None)
    if found is None:
        raise TraceFormatError("empty file: cannot detect the trace format", source=str(p))
    line_no, header_line = found
    columns = {c.strip().strip('"') for c in header_line.split(",")}
    for name, signature in _SIGNATURES:
        if signature <= columns:
            return name
    for name, hint in _HINTS:
        if hint & columns:
            return name
    raise TraceFormatError(
        f"cannot detect the trace format from the header {header_line.strip()!r}; "
        f"known formats: {_known()} (pass the format name explicitly)",
        source=str(p),
        line=line_no,
    )


def read_trace(path: str | Path, fmt: str | None = None) -> list[JobSpec]:
    """Read a trace file into canonical jobs sorted by (submit time, file order).

    ``fmt`` is a name from :data:`TRACE_FORMATS`; ``None`` detects it (:func:`detect_format`).
    """
    p = Path(path)
    if fmt is None:
        fmt = detect_format(p)
    reader = TRACE_FORMATS.get(fmt.strip().lower())
    if reader is None:
        raise TraceFormatError(
            f"unknown trace format; known formats: {_known()}",
            source=str(p),
            field="format",
            value=fmt,
        )
    return reader(p)
