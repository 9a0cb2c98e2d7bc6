"""Which Slurm wrote a JSON document, and whether the scheduler supports it.

Every ``--json`` output and slurmrestd response carries its version in ``meta``:

- Slurm 22.05-23.02 (data_parser v0.0.38/v0.0.39): ``meta.Slurm.version`` with integer
  ``major``/``minor``/``micro`` (22.05 is ``{"major": 22, "minor": 5, "micro": 8}``) and
  ``meta.Slurm.release`` (``"22.05.8"``);
- Slurm 23.11 on (v0.0.40-v0.0.44): ``meta.slurm.version`` with *string* fields
  (``{"major": "24", "minor": "11", "micro": "5"}``) and ``meta.slurm.release``.

The data_parser plugin is named in ``meta.plugin`` (``{"type": "openapi/v0.0.38"}`` on 22.05,
``{"data_parser": "data_parser/v0.0.42"}`` later) or ``meta.plugins``. When the document names
no version, the caller's fallback (``scontrol --version``) is used.

Supported: Slurm 22.05 to 25.11 (:data:`OLDEST`, :data:`NEWEST`). The table in
``docs/slurm-backend.md`` lists what each release was checked with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from slurm_sched.errors import ClusterMisreadError
from slurm_sched.slurm.document_errors import SlurmJsonError


@dataclass(frozen=True, order=True)
class SlurmVersion:
    """A Slurm release: ``SlurmVersion(24, 11, 5)`` prints as ``24.11.5``."""

    major: int
    minor: int
    micro: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"

    @property
    def release(self) -> str:
        """The release series, e.g. ``24.11``."""
        return f"{self.major}.{self.minor:02d}"

    @property
    def data_parser(self) -> str:
        """The newest data_parser version this release writes by default (``v0.0.42``)."""
        return DATA_PARSER.get((self.major, self.minor), "unknown")

    @property
    def supported(self) -> bool:
        return (OLDEST.major, OLDEST.minor) <= (self.major, self.minor) <= (
            NEWEST.major,
            NEWEST.minor,
        )


#: The oldest and newest supported release series.
OLDEST = SlurmVersion(22, 5)
NEWEST = SlurmVersion(25, 11)
SUPPORTED_RANGE = f"{OLDEST.release} to {NEWEST.release}"

#: Release series -> the data_parser version its ``--json`` writes by default.
DATA_PARSER: dict[tuple[int, int], str] = {
    (22, 5): "v0.0.38",
    (23, 2): "v0.0.39",
    (23, 11): "v0.0.40",
    (24, 5): "v0.0.41",
    (24, 11): "v0.0.42",
    (25, 5): "v0.0.43",
    (25, 11): "v0.0.44",
}


class UnsupportedSlurmVersion(ClusterMisreadError):
    """A Slurm release outside :data:`SUPPORTED_RANGE`; the message is one line."""

    def __init__(self, version: SlurmVersion | str, source: str) -> None:
        self.version = version
        self.source = source
        super().__init__(
            f"{source}: Slurm {version} is not supported (supported: {SUPPORTED_RANGE})"
        )


_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_release(text: str) -> SlurmVersion | None:
    """``"24.11.5"``, ``"slurm 22.05.8"``, ``"slurm-wlm 24.11.5"`` -> the version; None if none."""
    m = _RELEASE.search(text or "")
    if not m:
        return None
    return SlurmVersion(int(m[1]), int(m[2]), int(m[3] or 0))


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _meta_blocks(doc: Mapping[str, Any], keys: tuple[str, ...]) -> Iterator[Mapping[str, Any]]:
    """The objects under ``doc["meta"][key]`` for each of ``keys`` in turn, those that are
    objects (a document without a ``meta`` object has none)."""
    meta = doc.get("meta")
    if not isinstance(meta, Mapping):
        return
    for key in keys:
        block = meta.get(key)
        if isinstance(block, Mapping):
            yield block


def declared_version(doc: Mapping[str, Any]) -> SlurmVersion | None:
    """The version a document's ``meta`` declares (either spelling), or None."""
    for block in _meta_blocks(doc, ("slurm", "Slurm")):
        version = block.get("version")
        if isinstance(version, Mapping):
            major, minor = _int(version.get("major")), _int(version.get("minor"))
            if major is not None and minor is not None:
                return SlurmVersion(major, minor, _int(version.get("micro")) or 0)
        release = block.get("release")
        if isinstance(release, str) and (parsed := parse_release(release)):
            return parsed
    return None


def declared_data_parser(doc: Mapping[str, Any]) -> str | None:
    """``"v0.0.42"`` when ``meta`` names the data_parser / openapi plugin, else None."""
    for block in _meta_blocks(doc, ("plugin", "plugins")):
        for field in ("data_parser", "type"):
            m = re.search(r"v\d+\.\d+\.\d+", str(block.get(field) or ""))
            if m:
                return m.group(0)
    return None


def version_of(
    doc: Mapping[str, Any], source: str, fallback: SlurmVersion | None = None
) -> SlurmVersion:
    """The Slurm version behind ``doc``: declared, else ``fallback``; checked against the range.

    Raises:
        UnsupportedSlurmVersion: outside :data:`SUPPORTED_RANGE`.
        SlurmJsonError: no version declared and no fallback (the shape would be a guess).
    """
    version = declared_version(doc) or fallback
    if version is None:
        raise SlurmJsonError.missing(source, "meta.slurm.version", None)
    if not version.supported:
        raise UnsupportedSlurmVersion(version, source)
    return version
