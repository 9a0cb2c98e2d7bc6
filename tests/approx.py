"""Approximate comparison of nested expected values.

``pytest.approx`` compares flat numbers, sequences and mappings only: from pytest 9.1 on it
raises for nested ones (e.g. ``{"A": (0, 100)}``) instead of comparing them exactly.
"""

from __future__ import annotations

from typing import Any

import pytest


def approx_nested(expected: Any) -> Any:
    """``expected`` with every number wrapped in ``pytest.approx`` (dicts, lists and tuples
    rebuilt around them; other values, e.g. job ids, compared exactly), for ``got == ...``."""
    if isinstance(expected, dict):
        return {k: approx_nested(v) for k, v in expected.items()}
    if isinstance(expected, list | tuple):
        return type(expected)(approx_nested(v) for v in expected)
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        return pytest.approx(expected)
    return expected
