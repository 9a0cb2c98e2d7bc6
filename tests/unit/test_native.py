"""The compiled core's loader (slurm_sched.native): a build is served only while it matches."""

from __future__ import annotations

import hashlib
import importlib.machinery
import json

import pytest

from slurm_sched import native
from slurm_sched.policy.rubick import policy as rubick

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _fake_build(tmp_path, **override):
    """A build directory whose manifest names the current sources (and placeholder files)."""
    sources = {m: hashlib.sha256(native.source_path(m).read_bytes()).hexdigest()
               for m in native.COMPILED}
    files = {m: m + SUFFIX for m in native.COMPILED}
    manifest = {"sources": sources, "files": files, "suffix": SUFFIX, **override}
    for f in manifest["files"].values():
        (tmp_path / f).write_bytes(b"")
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def test_a_matching_build_is_served(tmp_path):
    _fake_build(tmp_path)
    files, why = native.check_build(tmp_path)
    assert why == ""
    assert set(files) == set(native.COMPILED)


@pytest.mark.parametrize(("override", "why"), [
    ({"sources": {m: "0" * 64 for m in native.COMPILED}},
     "stale: policy/rubick/candidates.py changed"),
    ({"suffix": ".cpython-27-foo.so"}, "built for .cpython-27-foo.so"),
    ({"sources": {}}, "built for []"),
])
def test_a_stale_or_foreign_build_is_not_served(tmp_path, override, why):
    _fake_build(tmp_path, **override)
    files, got = native.check_build(tmp_path)
    assert files == {}
    assert why in got


def test_a_build_with_a_file_missing_is_not_served(tmp_path):
    manifest = _fake_build(tmp_path)
    (tmp_path / manifest["files"]["slurm_sched.policy.rubick.policy"]).unlink()
    files, why = native.check_build(tmp_path)
    assert files == {}
    assert why.startswith("missing ") and why.endswith("slurm_sched.policy.rubick.policy" + SUFFIX)


def test_no_or_unreadable_manifest(tmp_path):
    assert native.check_build(tmp_path) == ({}, "not built (slurm-sched native build)")
    (tmp_path / "manifest.json").write_text("{not json")
    files, why = native.check_build(tmp_path)
    assert files == {} and why.startswith("unreadable manifest")


def test_require_mode_refuses_to_run_a_compiled_module_from_source():
    finder = native._Finder("require")
    finder._checked = ({}, "stale: policy/rubick/policy.py changed since the build")
    with pytest.raises(ImportError, match="SLURM_SCHED_NATIVE=require but the compiled core is "
                                          "stale"):
        finder.find_spec("slurm_sched.policy.rubick.policy")
    assert finder.find_spec("slurm_sched.policy.muri") is None  # not compiled: the source
    assert finder.find_spec("numpy") is None
    assert native._Finder("auto").find_spec("numpy") is None


@pytest.mark.parametrize(("raw", "want"), [
    ("", "auto"), ("auto", "auto"), ("0", "off"), ("OFF", "off"), ("false", "off"),
    ("require", "require"),
])
def test_mode_reads_the_environment(monkeypatch, raw, want):
    monkeypatch.setenv(native.ENV, raw)
    assert native.mode() == want


def test_a_bad_mode_names_the_variable_and_value(monkeypatch):
    monkeypatch.setenv(native.ENV, "fast")
    with pytest.raises(ValueError, match="SLURM_SCHED_NATIVE must be one of auto, off, require "
                                         r"\(or 0\), got 'fast'"):
        native.mode()


def test_source_module_is_the_pure_python_module():
    src = native.source_module("slurm_sched.policy.rubick.policy")
    assert src is native.source_module("slurm_sched.policy.rubick.policy")  # loaded once
    assert not native.is_compiled(src)
    assert src.__file__ == str(native.source_path("slurm_sched.policy.rubick.policy"))
    assert src.Rubick is not rubick.Rubick
    assert native.status()["slurm_sched.policy.rubick.policy"] in (
        ("compiled",) if native.is_compiled(rubick) else
        tuple(f"source: {w}" for w in ("off", native.check_build()[1])))


def test_source_modules_run_as_one_unit():
    """A source module's imports of the other compiled modules are their source modules (a
    patch of one is seen by all), while the modules imported as usual and their packages'
    attributes stay as they were."""
    import sys

    from slurm_sched.policy import placement
    from slurm_sched.policy import rubick as package
    from slurm_sched.policy.rubick import allocations

    src = native.source_module("slurm_sched.policy.rubick.policy")
    src_allocations = native.source_module("slurm_sched.policy.rubick.allocations")
    src_placement = native.source_module("slurm_sched.policy.placement")
    assert src.State is src_allocations.State is not allocations.State
    assert src_allocations.CountIndex is src_placement.CountIndex is not placement.CountIndex
    assert sys.modules["slurm_sched.policy.rubick.policy"] is rubick
    assert sys.modules["slurm_sched.policy.rubick.allocations"] is allocations
    assert package.policy is rubick and package.allocations is allocations
    assert package.Rubick is rubick.Rubick


def test_compiled_placement_matches_the_source():
    """The placement helpers (compiled with Rubick: its walk's free-GPU index) answer as the
    pure-Python module does, over random free maps and sequences of placements."""
    import random

    from slurm_sched.policy import placement

    src = native.source_module("slurm_sched.policy.placement")
    rng = random.Random(0)
    placed = 0
    for _ in range(300):
        nodes = [f"n{i}" for i in range(rng.randint(1, 12))]
        free = {n: sorted(rng.sample(range(8), rng.randint(0, 8))) for n in nodes}
        types = {n: rng.choice(["a100", "v100"]) for n in nodes}
        k = rng.randint(1, 24)
        for fn in ("pack_consolidated", "pack_most_free"):
            got = [getattr(m, fn)({n: list(g) for n, g in free.items()}, k)
                   for m in (placement, src)]
            assert got[0] == got[1]
        idx = [m.FreeIndex({n: list(g) for n, g in free.items()}, types)
               for m in (placement, src)]
        counts = [m.CountIndex({n: len(g) for n, g in free.items()}) for m in (placement, src)]
        for _ in range(8):
            k = rng.randint(1, 12)
            gtype = rng.choice([None, "a100", "v100"])
            assert idx[0].total(gtype) == idx[1].total(gtype)
            assert idx[0].best_fit_node(k, gtype) == idx[1].best_fit_node(k, gtype)
            assert idx[0].nodes_with(k % 9, 3, gtype) == idx[1].nodes_with(k % 9, 3, gtype)
            how = rng.choice(["consolidated", "most_free"])
            got = [getattr(i, how)(k, gtype) for i in idx]
            assert got[0] == got[1]
            placed += got[0] is not None
            node = rng.choice(nodes)
            c = rng.randint(0, 8)
            for ci in counts:
                ci.set(node, c)
            assert counts[0].counts() == counts[1].counts()
            assert counts[0].best_fit(k % 9, {node}) == counts[1].best_fit(k % 9, {node})
            assert counts[0].by_most(empty=True) == counts[1].by_most(empty=True)
            assert counts[0].most() == counts[1].most()
    assert placed > 100
