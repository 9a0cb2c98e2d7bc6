"""A cell: one simulation of a sweep; its stable id and its result file.

A cell's id is a readable prefix (policy, trace, load, cluster, seed) and the first 12 hex
digits of the SHA-256 of its canonical JSON (sorted keys, no spaces), so the same settings get
the same id in every run and on every machine. Its result is ``<out>/<id>.json``, created only
by ``os.replace`` of a complete temporary file in the same folder: a file with that name is
always a whole result. A cell that failed twice gets ``<out>/failed/<id>.json`` instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Version of the cell file layout; a file of another version counts as missing.
SCHEMA = 1
FAILED_DIR = "failed"


@dataclass(frozen=True)
class Cell:
    """The settings of one simulation (see :mod:`slurm_sched.sweep.grid` for the axes)."""

    trace: dict[str, Any]  # {"label", "file", "format", "limit"} or {"label", "generator", ...}
    cluster: str
    policy: str  # the grid's label
    policy_name: str  # the registry name
    options: dict[str, Any] = field(default_factory=dict)
    world: str = "auto"
    restart_overhead_s: float = 30.0
    metrics: tuple[str, ...] = ()
    keep_jcts: bool = True

    @property
    def trace_label(self) -> str:
        return str(self.trace["label"])

    @property
    def load(self) -> int | None:
        return self.trace.get("jobs")

    @property
    def seed(self) -> int | None:
        return self.trace.get("seed")

    def to_dict(self) -> dict[str, Any]:
        return {"trace": self.trace, "cluster": self.cluster, "policy": self.policy,
                "policy_name": self.policy_name, "options": self.options, "world": self.world,
                "restart_overhead_s": self.restart_overhead_s, "metrics": list(self.metrics),
                "keep_jcts": self.keep_jcts}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        return cls(trace=d["trace"], cluster=d["cluster"], policy=d["policy"],
                   policy_name=d["policy_name"], options=d["options"], world=d["world"],
                   restart_overhead_s=float(d["restart_overhead_s"]),
                   metrics=tuple(d["metrics"]), keep_jcts=bool(d["keep_jcts"]))


def canonical_json(cell: Cell) -> str:
    return json.dumps(cell.to_dict(), sort_keys=True, separators=(",", ":"))


_UNSAFE = re.compile(r"[^A-Za-z0-9.]+")


def cell_id(cell: Cell) -> str:
    digest = hashlib.sha256(canonical_json(cell).encode()).hexdigest()[:12]
    parts = [cell.policy, cell.trace_label]
    if cell.load is not None:
        parts.append(f"n{cell.load}")
    parts.append(cell.cluster)
    if cell.seed is not None:
        parts.append(f"s{cell.seed}")
    prefix = "_".join(_UNSAFE.sub("-", p).strip("-") for p in parts)[:60]
    return f"{prefix}_{digest}"


def result_path(out: Path, cell: Cell) -> Path:
    return out / f"{cell_id(cell)}.json"


def failed_path(out: Path, cell: Cell) -> Path:
    return out / FAILED_DIR / f"{cell_id(cell)}.json"


def write_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write JSON to a temporary file beside ``path`` (a unique name: concurrent writers never
    share one), flush it to disk, then rename it onto ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, separators=(",", ":"))
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_result(path: Path, cell: Cell | None = None) -> dict[str, Any] | None:
    """A cell file's content when it is a complete result (of ``cell`` when given), else None."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or "metrics" not in doc:
        return None
    if cell is not None and doc.get("cell") != cell.to_dict():
        return None
    return doc


def is_done(out: Path, cell: Cell) -> bool:
    return read_result(result_path(out, cell), cell) is not None


def missing(out: Path, cells: Sequence[Cell]) -> list[Cell]:
    """The cells without a complete result file in ``out``, in their order."""
    return [c for c in cells if not is_done(out, c)]
