"""Options that several click commands share, applied as one decorator."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def with_options(options: Sequence[Callable[[F], F]]) -> Callable[[F], F]:
    """A decorator that applies every click option of ``options`` to a command; ``--help``
    lists them in the order of ``options``."""

    def deco(f: F) -> F:
        for o in reversed(options):
            f = o(f)
        return f

    return deco
