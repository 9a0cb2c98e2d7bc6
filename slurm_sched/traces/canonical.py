"""The project's own trace format: one job per CSV row or JSONL line, whose columns/keys are
exactly the :class:`JobSpec` fields (see ``docs/trace-format.md``).

Required: ``job_id`` (text), ``submit_time_s`` (s, >= 0), ``num_gpus`` (int >= 1),
``duration_s`` (s, > 0). Optional: ``user`` (default ``default``), ``model``, ``batch_size``,
``iterations``, ``gpu_type``, ``num_cpus``, ``time_limit_s``, ``stage_times_ms`` and ``attrs``.

* CSV: header row with any subset/order of the columns (the four required ones must be there);
  an empty cell means "not given"; ``stage_times_ms`` is a ``;``-separated list of numbers;
  ``attrs`` is a JSON object. Text cells are taken verbatim (not stripped).
* JSONL: one JSON object per line; ``null`` or an absent key means "not given";
  ``stage_times_ms`` is a list of numbers; ``attrs`` an object.

Unknown columns/keys are errors (they are usually typos). :func:`write_canonical` writes either
variant (chosen by the suffix), so any trace can be converted; reading the written file gives back
exactly the same jobs. Limits of the CSV variant: an empty string and an empty
``stage_times_ms`` cannot be told from "not given", so writing them raises; use JSONL.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from slurm_sched.errors import TraceFormatError
from slurm_sched.model.job import JobSpec
from slurm_sched.traces._common import (
    CsvTable,
    JobCollector,
    Row,
    check_float,
    error,
    first_nonblank_line,
    parse_float,
    read_text,
)

NAME = "canonical"
REQUIRED = ("job_id", "submit_time_s", "num_gpus", "duration_s")
OPTIONAL = (
    "user",
    "model",
    "batch_size",
    "iterations",
    "gpu_type",
    "num_cpus",
    "time_limit_s",
    "stage_times_ms",
    "attrs",
)
COLUMNS = REQUIRED + OPTIONAL
SIGNATURE = frozenset(REQUIRED)
JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson", ".json"})

_INT_FIELDS = frozenset({"num_gpus", "batch_size", "iterations", "num_cpus"})
_TEXT_FIELDS = frozenset({"job_id", "user", "model", "gpu_type"})


def is_jsonl(path: Path, text: str | None = None) -> bool:
    """JSONL when the suffix says so, or when the first non-blank line starts with ``{``."""
    if path.suffix.lower() in JSONL_SUFFIXES:
        return True
    if text is None:
        return False
    first = first_nonblank_line(text)
    return first is not None and first.lstrip().startswith("{")


def read(path: str | Path) -> list[JobSpec]:
    """Read a canonical trace, CSV or JSONL (by suffix, else by content)."""
    p = Path(path)
    text = read_text(p)
    if is_jsonl(p, text):
        return _read_jsonl(p, text)
    return _read_csv(p)


# ---------------------------------------------------------------------------------------- CSV


def _read_csv(path: Path) -> list[JobSpec]:
    table = CsvTable(path, REQUIRED, fmt=NAME)
    unknown = [c for c in table.header if c not in COLUMNS]
    if unknown:
        raise error(
            table.source,
            table.header_line,
            unknown[0],
            None,
            "unknown column in the canonical format; known columns: " + ", ".join(COLUMNS),
        )
    out = JobCollector(table.source)
    for row in table.rows():
        fields: dict[str, Any] = {}
        for col in table.header:
            value = _csv_cell(row, col)
            if value is not None:
                fields[col] = value
        for col in REQUIRED:
            if col not in fields:
                raise row.fail(col, row.raw(col), "missing value")
        out.add(row.line, "job_id", fields)
    return out.finish()


def _csv_cell(row: Row, col: str) -> Any:
    raw = row.raw(col)
    if col in _TEXT_FIELDS:
        return raw or None
    if not raw.strip():
        return None
    if col in _INT_FIELDS:
        return row.integer(col, minimum=1)
    if col == "submit_time_s":
        return row.number(col, minimum=0.0)
    if col in ("duration_s", "time_limit_s"):
        return row.number(col, positive=True)
    if col == "stage_times_ms":
        items: list[float] = []
        for part in raw.split(";"):
            if not part.strip():
                raise row.fail(col, raw, "empty item in the ';'-separated list")
            items.append(
                parse_float(part, minimum=0.0, source=row.source, line=row.line, field=col)
            )
        return tuple(items)
    if col == "attrs":
        try:
            attrs = json.loads(raw)
        except ValueError as exc:
            raise row.fail(col, raw, f"not valid JSON ({exc.args[0]})") from None
        except RecursionError:  # found by fuzzing: deeply nested JSON
            raise row.fail(col, _short(raw), "not valid JSON (nested too deeply)") from None
        if not isinstance(attrs, dict):
            raise row.fail(col, raw, "not a JSON object")
        return attrs
    raise AssertionError(col)  # pragma: no cover - COLUMNS is exhaustive


# -------------------------------------------------------------------------------------- JSONL


def _read_jsonl(path: Path, text: str) -> list[JobSpec]:
    source = str(path)
    out = JobCollector(source)
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise error(source, n, None, _short(line), f"not valid JSON ({exc.args[0]})") from None
        except RecursionError:  # found by fuzzing: deeply nested JSON
            raise error(
                source, n, None, _short(line), "not valid JSON (nested too deeply)"
            ) from None
        if not isinstance(obj, dict):
            raise error(source, n, None, _short(line), "not a JSON object")
        fields: dict[str, Any] = {}
        for key, value in obj.items():
            if key not in COLUMNS:
                raise error(source, n, key, value, "unknown key; known keys: " + ", ".join(COLUMNS))
            if value is not None:
                fields[key] = _json_value(key, value, source, n)
        for key in REQUIRED:
            if key not in fields:
                raise error(source, n, key, None, "missing required key")
        out.add(n, "job_id", fields)
    return out.finish()


def _short(line: str, limit: int = 80) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _json_value(key: str, value: Any, source: str, line: int) -> Any:
    def fail(msg: str) -> TraceFormatError:
        return error(source, line, key, value, msg)

    def number(item: Any, not_a_number: str) -> float:
        """``item`` (``value`` or one of its items) as a float: a JSON number, not a boolean."""
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise fail(not_a_number)
        try:
            return float(item)
        except OverflowError:
            raise fail("not a finite number") from None

    if key in _TEXT_FIELDS:
        if key == "job_id" and isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise fail("not a string")
        return value
    if key in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail("not an integer")
        if isinstance(value, float) and not value.is_integer():
            raise fail("not an integer")
        if value < 1:
            raise fail("must be >= 1")
        return int(value)
    if key in ("submit_time_s", "duration_s", "time_limit_s"):
        return check_float(
            number(value, "not a number"),
            value,
            minimum=0.0 if key == "submit_time_s" else None,
            positive=key != "submit_time_s",
            source=source,
            line=line,
            field=key,
        )
    if key == "stage_times_ms":
        if not isinstance(value, list):
            raise fail("not a list of numbers")
        items: list[float] = []
        for item in value:
            items.append(
                check_float(
                    number(item, "not a list of numbers"),
                    value,
                    minimum=0.0,
                    source=source,
                    line=line,
                    field=key,
                )
            )
        return tuple(items)
    if key == "attrs":
        if not isinstance(value, dict):
            raise fail("not a JSON object")
        return value
    raise AssertionError(key)  # pragma: no cover - COLUMNS is exhaustive


# ------------------------------------------------------------------------------------- writer


def write_canonical(jobs: Iterable[JobSpec], path: str | Path) -> Path:
    """Write ``jobs`` in the canonical format: JSONL when the suffix is ``.jsonl``/``.ndjson``/
    ``.json``, CSV otherwise. Returns the path. Reading it back gives the same jobs (sorted by
    submit time)."""
    p = Path(path)
    if p.suffix.lower() in JSONL_SUFFIXES:
        lines = [_json_line(job, str(p)) for job in jobs]
        _write(p, "".join(line + "\n" for line in lines))
    else:
        rows = [_csv_record(job, str(p)) for job in jobs]
        try:
            with p.open("w", newline="", encoding="utf-8") as fh:
                writer = csv.writer(fh, lineterminator="\r\n")  # CRLF: a lone "\r" gets quoted
                writer.writerow(COLUMNS)
                writer.writerows(rows)
        except OSError as exc:
            raise TraceFormatError(
                f"cannot write file: {exc.strerror or exc}", source=str(p)
            ) from None
    return p


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TraceFormatError(
            f"cannot write file: {exc.strerror or exc}", source=str(path)
        ) from None


def _dumps(value: Any, job: JobSpec, source: str, field: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TraceFormatError(
            f"job {job.job_id!r}: cannot be written as JSON ({exc})", source=source, field=field
        ) from None


def _json_line(job: JobSpec, source: str) -> str:
    return _dumps(_json_record(job), job, source, "job")


def _json_record(job: JobSpec) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for key in COLUMNS:
        value = getattr(job, key)
        if value is None or (key == "attrs" and not value):
            continue
        if key == "stage_times_ms":
            value = list(value)
        record[key] = value
    return record


def _csv_record(job: JobSpec, source: str) -> list[str]:
    def fail(field: str, value: object, msg: str) -> TraceFormatError:
        return TraceFormatError(msg, source=source, field=field, value=value)

    cells: list[str] = []
    for key in COLUMNS:
        value = getattr(job, key)
        if value is None:
            cells.append("")
        elif key in _TEXT_FIELDS:
            if value == "":
                raise fail(
                    key,
                    value,
                    f"job {job.job_id!r}: an empty string cannot be written to "
                    "CSV (it would read back as 'not given'); use JSONL",
                )
            cells.append(value)
        elif key == "stage_times_ms":
            if not value:
                raise fail(
                    key,
                    value,
                    f"job {job.job_id!r}: an empty list cannot be written to "
                    "CSV (it would read back as 'not given'); use JSONL",
                )
            cells.append(";".join(_float_text(v) for v in value))
        elif key == "attrs":
            cells.append(_dumps(value, job, source, key) if value else "")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise fail(key, value, f"job {job.job_id!r}: not a finite number")
            cells.append(_float_text(value))
        else:
            cells.append(str(value))
    return cells


def _float_text(value: float) -> str:
    """Shortest text that reads back as exactly the same float."""
    return repr(float(value))
