"""``benchmarks/themis_solver.py``: without the artifact's solver installed it says what to
install and exits 2, writing nothing; the literal form keeps the artifact's variable order."""

from __future__ import annotations

import builtins

import pytest


@pytest.fixture
def mod(load_script):
    """The script, imported for this test only."""
    return load_script("themis_solver")


def test_a_missing_solver_is_named_with_the_install_command(mod, tmp_path, monkeypatch, capsys):
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


class _Spec:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id


class _Job:
    def __init__(self, job_id: str, executed_s: float) -> None:
        self.spec = _Spec(job_id)
        self.executed_s = executed_s

    def executed_at(self, now_s: float) -> float:
        return self.executed_s


def test_the_literal_form_keeps_the_artifacts_runnable_list_order(mod):
    import numpy as np

    alloc = mod.LiteralEcosAllocator()
    # a never ran (rank x * 1e9), c has more rounds per executed second than b
    alloc.jobs = [_Job("a", 0.0), _Job("b", 100.0), _Job("c", 50.0)]
    alloc.now_s = 10.0
    alloc._remember([0, 1, 2], np.array([0.5, 0.2, 0.2]), np.array([1.0, 4.0, 1.0]))
    # rank order a, c, b; then by GPU count, descending and stable: b, a, c
    assert alloc._order == ["b", "a", "c"]
    # the time each job should have received grows by its share of the elapsed time
    assert alloc._should_s == {"a": 5.0, "b": 2.0, "c": 2.0}
