"""Shared machinery of the trace readers.

* :class:`CsvTable` reads a CSV file with 1-based line numbers (the header is line 1 when the file
  starts with it), checks the required columns and the number of fields of every row, and skips
  blank lines.
* :class:`Row` parses one cell into a typed value, raising :class:`TraceFormatError` that names the
  file, the line, the column as written in the file and the raw value.
* :class:`JobCollector` builds the :class:`JobSpec` of each row, rejects duplicate job ids and
  returns the jobs sorted by submit time (stable: ties keep the file order).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from slurm_sched.errors import TraceFormatError
from slurm_sched.model.job import JobSpec


def read_text(path: Path) -> str:
    """The whole file as text (UTF-8, a leading BOM is dropped); I/O errors become
    :class:`TraceFormatError`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(
            f"cannot read file: {exc.strerror or exc}", source=str(path)
        ) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TraceFormatError(
            f"not valid UTF-8 text (byte {exc.start})", source=str(path), line=line
        ) from None


def first_nonblank_line(text: str) -> str | None:
    for line in text.splitlines():
        if line.strip():
            return line
    return None


def error(
    source: str, line: int | None, field: str | None, raw: object, msg: str
) -> TraceFormatError:
    return TraceFormatError(msg, source=source, line=line, field=field, value=raw)


class Row:
    """One data row of a :class:`CsvTable`, with typed accessors that report bad cells."""

    __slots__ = ("cells", "index", "line", "source")

    def __init__(self, source: str, line: int, cells: list[str], index: dict[str, int]) -> None:
        self.source = source
        self.line = line
        self.cells = cells
        self.index = index

    def has(self, col: str) -> bool:
        return col in self.index

    def raw(self, col: str) -> str:
        return self.cells[self.index[col]]

    def fail(self, col: str | None, raw: object, msg: str) -> TraceFormatError:
        return error(self.source, self.line, col, raw, msg)

    def text(self, col: str) -> str:
        return nonblank(self.raw(col), source=self.source, line=self.line, field=col)

    def opt_text(self, col: str) -> str | None:
        if col not in self.index:
            return None
        return self.raw(col).strip() or None

    def integer(self, col: str, *, minimum: int | None = None) -> int:
        raw = self.raw(col)
        return parse_int(raw, minimum=minimum, source=self.source, line=self.line, field=col)

    def opt_integer(self, col: str, *, minimum: int | None = None) -> int | None:
        if col not in self.index or not self.raw(col).strip():
            return None
        return self.integer(col, minimum=minimum)

    def number(self, col: str, *, minimum: float | None = None, positive: bool = False) -> float:
        raw = self.raw(col)
        return parse_float(
            raw, minimum=minimum, positive=positive, source=self.source, line=self.line, field=col
        )

    def opt_number(self, col: str, *, minimum: float | None = None) -> float | None:
        if col not in self.index or not self.raw(col).strip():
            return None
        return self.number(col, minimum=minimum)

    def flag(self, col: str) -> bool:
        raw = self.raw(col)
        value = raw.strip().lower()
        if value in ("1", "true", "yes"):
            return True
        if value in ("0", "false", "no"):
            return False
        raise self.fail(col, raw, "not a boolean (expected 0/1 or true/false)")


def nonblank(raw: str, *, source: str, line: int | None, field: str) -> str:
    """``raw`` without surrounding white space; nothing left is a "missing value" error."""
    text = raw.strip()
    if not text:
        raise error(source, line, field, raw, "missing value")
    return text


def parse_int(raw: str, *, minimum: int | None, source: str, line: int | None, field: str) -> int:
    text = nonblank(raw, source=source, line=line, field=field)
    try:
        value = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            raise error(source, line, field, raw, "not an integer") from None
        if not as_float.is_integer():
            raise error(source, line, field, raw, "not an integer") from None
        value = int(as_float)
    if minimum is not None and value < minimum:
        raise error(source, line, field, raw, f"must be >= {minimum}")
    return value


def parse_float(
    raw: str,
    *,
    minimum: float | None = None,
    positive: bool = False,
    source: str,
    line: int | None,
    field: str,
) -> float:
    text = nonblank(raw, source=source, line=line, field=field)
    try:
        value = float(text)
    except ValueError:
        raise error(source, line, field, raw, "not a number") from None
    return check_float(
        value, raw, minimum=minimum, positive=positive, source=source, line=line, field=field
    )


def check_float(
    value: float,
    raw: object,
    *,
    minimum: float | None = None,
    positive: bool = False,
    source: str,
    line: int | None,
    field: str,
) -> float:
    if not math.isfinite(value):
        raise error(source, line, field, raw, "not a finite number")
    if positive and value <= 0:
        raise error(source, line, field, raw, "must be > 0")
    if minimum is not None and value < minimum:
        raise error(source, line, field, raw, f"must be >= {minimum:g}")
    return value


class CsvTable:
    """A CSV trace file: header, column index and numbered data rows."""

    def __init__(self, path: Path, required: Sequence[str], *, fmt: str) -> None:
        self.path = path
        self.source = str(path)
        self.fmt = fmt
        text = read_text(path)
        self._reader = csv.reader(io.StringIO(text, newline=""))
        header: list[str] | None = None
        try:
            for cells in self._reader:
                if any(c.strip() for c in cells):
                    header = [c.strip() for c in cells]
                    break
        except csv.Error as exc:
            raise error(self.source, self._reader.line_num, None, None, f"bad CSV: {exc}") from None
        if header is None:
            raise TraceFormatError(f"empty file: no header row ({fmt} format)", source=self.source)
        self.header = header
        self.header_line = self._reader.line_num
        self.index: dict[str, int] = {}
        for i, name in enumerate(header):
            if name in self.index:
                raise error(self.source, self.header_line, name, None, "duplicate column in header")
            self.index[name] = i
        missing = [c for c in required if c not in self.index]
        if missing:
            cols = ", ".join(repr(c) for c in missing)
            raise error(
                self.source,
                self.header_line,
                missing[0],
                None,
                f"missing required column(s) {cols} for the {fmt} format; header is: "
                + ",".join(header),
            )

    def rows(self) -> Iterator[Row]:
        width = len(self.header)
        reader = self._reader
        try:
            for cells in reader:
                if len(cells) != width:
                    if not cells or (len(cells) == 1 and not cells[0].strip()):
                        continue  # blank line
                    raise error(
                        self.source,
                        reader.line_num,
                        None,
                        None,
                        f"row has {len(cells)} fields but the header has {width}",
                    )
                yield Row(self.source, reader.line_num, cells, self.index)
        except csv.Error as exc:
            raise error(self.source, reader.line_num, None, None, f"bad CSV: {exc}") from None


class JobCollector:
    """Builds jobs row by row, rejects duplicate ids, returns them sorted by submit time."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.jobs: list[JobSpec] = []
        self._seen: dict[str, int] = {}

    def add(self, line: int, id_field: str, fields: dict[str, Any]) -> JobSpec:
        job_id = fields["job_id"]
        first = self._seen.get(job_id)
        if first is not None:
            raise error(
                self.source,
                line,
                id_field,
                job_id,
                f"duplicate job id (first seen on line {first})",
            )
        try:
            job = JobSpec(**fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or None
            raise error(self.source, line, loc, err.get("input"), err["msg"]) from None
        self._seen[job_id] = line
        self.jobs.append(job)
        return job

    def finish(self) -> list[JobSpec]:
        if not self.jobs:
            raise TraceFormatError(
                "no jobs in file (only a header or blank lines)", source=self.source
            )
        jobs = self.jobs
        jobs.sort(key=_submit_key)  # stable: ties keep the file order
        return jobs


def _submit_key(job: JobSpec) -> float:
    return job.submit_time_s
