"""The reader of ``sacct -P`` / ``--parsable2`` text: a header line, then one ``|``-separated
record per line, columns in any order (``docs/accounting-input.md``).

Times are ISO 8601 as sacct prints them by default (``2024-05-01T10:00:00``) and are read in the
local time zone of the process that reads them (the ``TZ`` environment variable), which must be
the zone sacct printed them in; ``Unknown``, ``None`` and an empty cell mean "not set". A time
with an explicit offset is taken as written. ``sacct -p`` (a trailing ``|`` on every line) reads
the same.
"""

from __future__ import annotations

import functools
import operator
import re
from datetime import datetime

from slurm_sched.errors import TraceFormatError
from slurm_sched.model.slurm_time import slurm_duration_s
from slurm_sched.traces.sacct_records import Accounting
from slurm_sched.traces.sacct_rules import (
    Collector,
    GpuTres,
    Malformed,
    base_state,
    choose_gpus,
    expand_nodes,
    is_gpu_name,
    read_hints,
)

#: The columns the reader needs, in the order ``sacct_argv`` asks for them; ``JobIDRaw`` and
#: ``Comment`` are optional.
COLUMNS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "User",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Timelimit",
    "AllocTRES",
    "ReqTRES",
    "NodeList",
    "Comment",
)
OPTIONAL_COLUMNS = frozenset({"JobIDRaw", "Comment"})
REQUIRED_COLUMNS = tuple(c for c in COLUMNS if c not in OPTIONAL_COLUMNS)

_NOT_SET = frozenset({"", "Unknown", "None", "N/A"})
_NO_LIMIT = frozenset({"", "UNLIMITED", "Partition_Limit", "None", "INFINITE"})
_TRES_ITEM = re.compile(r"[^=,]+=[^,]*")
_TRES = re.compile(r"[^=,]+=[^,]*(?:,[^=,]+=[^,]*)*")
_GPU_ITEM = re.compile(r"(?:^|,)gres/(gpu[^=,]*)=([^,]*)")


def parse_time(raw: str, field: str) -> float | None:
    """Epoch seconds of an ISO time (local time zone unless it has an offset); ``None`` for
    ``Unknown``/``None``/empty."""
    if raw in _NOT_SET:
        return None
    try:
        return datetime.fromisoformat(raw).timestamp()
    except (ValueError, OverflowError, OSError):
        raise Malformed(field, raw, "not a time (expected YYYY-MM-DDTHH:MM:SS)") from None


@functools.lru_cache(maxsize=4096)
def parse_time_limit(raw: str, field: str = "Timelimit") -> float | None:
    """Seconds of a Slurm time limit; ``None`` for ``UNLIMITED``, ``Partition_Limit``, empty
    or zero (Slurm's ``--time=0`` means no limit).

    Forms (Slurm's ``--time``): ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``.
    Cached: a site has few distinct limits.
    """
    if raw in _NO_LIMIT:
        return None
    try:
        seconds = slurm_duration_s(raw)
    except ValueError:
        raise Malformed(
            field, raw, "not a time limit (expected [D-]HH:MM:SS or UNLIMITED)"
        ) from None
    return seconds if seconds > 0 else None


@functools.lru_cache(maxsize=4096)
def parse_tres(raw: str, field: str) -> tuple[int | None, str | None]:
    """(GPUs listed or ``None`` when none is named, the GPU type) of a TRES string
    (``cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=16G``), see :class:`GpuTres`.

    Every item must be ``name=value``; GPU counts must be whole numbers >= 0. Cached: TRES
    strings repeat across the jobs of a site.
    """
    gpus = GpuTres()
    if not raw:
        return None, None
    if _TRES.fullmatch(raw) is None:
        bad = next((i for i in raw.split(",") if not _TRES_ITEM.fullmatch(i)), raw)
        raise Malformed(field, raw, f"not a TRES list (item {bad!r} is not name=value)")
    for name, value in _GPU_ITEM.findall(raw):
        if not is_gpu_name(name):
            continue
        if not value.isdigit():
            raise Malformed(field, raw, f"not a TRES list (GPU count {value!r})")
        gpus.add(name, int(value))
    return gpus.count(), gpus.kind()


def parse_exit_code(raw: str, field: str = "ExitCode") -> int | None:
    """``2:0`` -> 2 (the code before the colon; the signal after it is not kept)."""
    if raw in _NOT_SET:
        return None
    code = raw.partition(":")[0]
    if not code.isdigit():
        raise Malformed(field, raw, "not an exit code (expected CODE:SIGNAL)")
    return int(code)


def read_parsable2(source: str, text: str) -> Accounting:
    """Read the text of one ``sacct -P`` file (see the module docstring). Cells are taken as
    written (sacct pads none); header names may carry surrounding blanks."""
    lines = text.split("\n")
    header_at = next((i for i, line in enumerate(lines) if line.strip()), None)
    if header_at is None:
        raise TraceFormatError("empty file: no sacct header line", source=source)
    header = lines[header_at].rstrip("\r").split("|")
    trailing = header[-1] == ""  # sacct -p ends every line with the delimiter
    if trailing:
        header.pop()
    index = {name.strip(): i for i, name in enumerate(header)}
    missing = [c for c in REQUIRED_COLUMNS if c not in index]
    if missing:
        raise TraceFormatError(
            f"not sacct -P output: missing column(s) {', '.join(missing)}; "
            f"write it with sacct -P --format={','.join(COLUMNS)}",
            source=source,
            line=header_at + 1,
        )
    width = len(header)
    i_comment = index.get("Comment")
    i_jobid = index["JobID"]
    # One C-level call picks a record's cells in the order _record unpacks them.
    pick = operator.itemgetter(*(index[c] for c in REQUIRED_COLUMNS))
    out = Collector(source, "parsable2")
    for n in range(header_at + 1, len(lines)):
        line = lines[n]
        if line.endswith("\r"):
            line = line[:-1]
        if not line or line.isspace():
            continue
        cells = line.split("|")
        if trailing and cells[-1] == "":
            cells.pop()
        if len(cells) > i_jobid and "." in cells[i_jobid]:
            out.steps_ignored += 1
            continue
        out.records += 1
        try:
            if len(cells) != width:
                cells = _fit(cells, width, i_comment, line)
            comment = cells[i_comment] if i_comment is not None else None
            _record(out, pick(cells), comment, n + 1, source)
        except Malformed as exc:
            out.malformed(f"{source}:{n + 1}", exc)
    return out.finish()


def _fit(cells: list[str], width: int, i_comment: int | None, line: str) -> list[str]:
    """The cells of a line matched to the header. A comment may itself hold ``|``: when the
    line has too many cells and the header has a Comment column, the extra cells are put back
    into the comment."""
    if len(cells) > width and i_comment is not None:
        extra = len(cells) - width
        joined = "|".join(cells[i_comment : i_comment + extra + 1])
        return [*cells[:i_comment], joined, *cells[i_comment + extra + 1 :]]
    raise Malformed(
        "line", line, f"has {len(cells)} field(s), the header has {width} (missing column?)"
    )


def _record(
    out: Collector, cells: tuple[str, ...], comment: str | None, line: int, source: str
) -> None:
    """Parse one record's cells (in REQUIRED_COLUMNS order) and hand them to ``out``."""
    (
        job_id,
        user,
        account,
        partition,
        qos,
        state_raw,
        exit_raw,
        submit_raw,
        eligible_raw,
        start_raw,
        end_raw,
        limit_raw,
        alloc_raw,
        req_raw,
        nodes_raw,
    ) = cells
    if not job_id:
        raise Malformed("JobID", job_id, "missing value")
    state = base_state(state_raw.split(), "State", state_raw)
    submit = parse_time(submit_raw, "Submit")
    if submit is None:
        raise Malformed("Submit", submit_raw, "missing value")
    start = parse_time(start_raw, "Start")
    end = parse_time(end_raw, "End")
    if start is not None and end is not None and end < start and state != "CANCELLED":
        raise Malformed("End", end_raw, f"before Start {start_raw!r}")
    alloc = parse_tres(alloc_raw, "AllocTRES")
    req = parse_tres(req_raw, "ReqTRES")
    exit_code = parse_exit_code(exit_raw)
    eligible = parse_time(eligible_raw, "Eligible")
    time_limit = parse_time_limit(limit_raw)
    nodes = expand_nodes(nodes_raw, "NodeList")
    # Hints last: a record skipped as malformed gets one warning, never a hint warning too.
    hints, warning = read_hints(comment, f"{source}:{line}")
    if warning is not None:
        out.warnings.append(warning)
    out.add(
        job_id,
        user,
        account,
        partition,
        qos,
        state,
        exit_code,
        submit,
        eligible,
        start,
        end,
        time_limit,
        choose_gpus(alloc, req),
        nodes,
        hints,
        line,
    )
