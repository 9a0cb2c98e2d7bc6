"""Loading a script of ``benchmarks/`` as a module, for one test only."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture
def load_script(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """``load_script("name")`` imports ``benchmarks/name.py`` (with ``benchmarks/`` on the path,
    for the ``crosscheck`` it imports), undone after the test."""

    def load(name: str) -> ModuleType:
        monkeypatch.syspath_prepend(str(BENCH))
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, mod)
        spec.loader.exec_module(mod)
        return mod

    return load
