"""``benchmarks/themis_solver.py``: without the artifact's solver installed it says what to
install and exits 2, writing nothing."""

from __future__ import annotations

import builtins
import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


def test_a_missing_solver_is_named_with_the_install_command(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("themis_solver", BENCH / "themis_solver.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "themis_solver", mod)
    spec.loader.exec_module(mod)
    real_import = builtins.__import__

    def no_cvxpy(name, *args, **kwargs):
        if name in ("cvxpy", "ecos"):
            raise ImportError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cvxpy)
    out = tmp_path / "themis_solver.json"
    assert mod.main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cvxpy is missing" in err and "pip install cvxpy==1.9.3 ecos==2.0.14" in err
    assert not out.exists()
