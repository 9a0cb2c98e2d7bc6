"""Kept hashes for Rubick's frozen value classes (:func:`hash_once`).
"""

from __future__ import annotations

from typing import Any, TypeVar

_T = TypeVar("_T")
def hash_once(cls: type[_T]) -> type[_T]:
    """Class decorator for frozen dataclasses: the generated ``__hash__`` (of the fields'
    tuple) computed once per object and kept. Models, plans, job infos and candidates key the
    schedulers' caches and are hashed hundreds of thousands of times a pass; their fields
    never change. The kept hash is left out of the pickled state: string hashes differ
    between processes, so a copy computes its own."""
    compute = cls.__hash__

    def __hash__(self: Any) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = compute(self)
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self: Any) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    cls.__hash__ = __hash__  # type: ignore[method-assign,assignment]
    cls.__getstate__ = __getstate__  # type: ignore[method-assign,assignment]
    return cls
