"""Errors about Slurm documents: one line naming the document, the field and the release.

:class:`SlurmJsonError` is a document that reports errors or cannot be used;
:class:`SlurmMisreadError` (also a :class:`~slurm_sched.errors.ClusterMisreadError`) one that
lacks or garbles a field the scheduler needs, which is never retried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from slurm_sched.errors import ClusterMisreadError, SlurmSchedError

if TYPE_CHECKING:  # annotations only: version.py raises these errors
    from slurm_sched.slurm.version import SlurmVersion


class SlurmJsonError(SlurmSchedError):
    """A Slurm JSON document that cannot be used: it reports errors (``squeue --json`` exits 0
    even then), or lacks or garbles a field the scheduler needs. One line, naming the
    document, the field and the Slurm release when known."""

    def __init__(
        self,
        source: str,
        errors: Sequence[Mapping[str, Any]] = (),
        *,
        message: str | None = None,
        field: str | None = None,
        version: SlurmVersion | None = None,
    ) -> None:
        self.source = source
        self.errors = list(errors)
        self.field = field
        self.version = version
        if message is None:
            text = "; ".join(
                " ".join(str(e.get(k)) for k in ("source", "description", "error") if e.get(k))
                for e in errors
            )
            message = f"{source} reported errors: {text or errors!r}"
        super().__init__(message)

    @staticmethod
    def missing(source: str, field: str, version: SlurmVersion | None) -> SlurmMisreadError:
        return SlurmMisreadError(
            source, message=f"{source}: field '{field}' is missing{_on(version)}",
            field=field, version=version,
        )

    @staticmethod
    def bad(
        source: str, field: str, value: Any, why: str, version: SlurmVersion | None
    ) -> SlurmMisreadError:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        return SlurmMisreadError(
            source, message=f"{source}: field '{field}' = {shown}: {why}{_on(version)}",
            field=field, version=version,
        )


class SlurmMisreadError(SlurmJsonError, ClusterMisreadError):
    """A document that lacks or garbles a field the scheduler needs (never retried)."""


def _on(version: SlurmVersion | None) -> str:
    return f" (Slurm {version})" if version is not None else ""


def check_errors(data: Mapping[str, Any], source: str) -> None:
    """Raise :class:`SlurmJsonError` if the document has a non-empty ``errors`` list."""
    errors = data.get("errors") or []
    if errors:
        raise SlurmJsonError(source, errors)
