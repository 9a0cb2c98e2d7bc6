"""``benchmarks/pollux_search.py``: ours and the published runs against the artifact's code
run with our search, with the cross-check's measures."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def mod(load_script):
    """The script, imported for this test only."""
    return load_script("pollux_search")


def test_totals_weigh_each_workload_by_its_jobs(mod):
    rows = [{"jobs": 80, "ours": {"end_within_1pct": 1.0, "jct_within_1pct": 0.5}},
            {"jobs": 240, "ours": {"end_within_1pct": 0.5, "jct_within_1pct": 0.25}}]
    assert mod.totals(rows, "ours") == pytest.approx(
        {"end_within_1pct": (80 + 120) / 320, "jct_within_1pct": (40 + 60) / 320})


def test_a_run_that_is_ours_agrees_on_every_job(mod, tmp_path, capsys):
    trace = "workloads-0.5/workload-1"
    artifact = mod.xc.ARTIFACTS["pollux"]
    done = mod.xc.run(artifact, artifact.trace(trace), "pollux", "artifact").completed
    jcts = {c.spec.job_id: c.jct_s for c in done}
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "0.5-workload-1.json").write_text(json.dumps(
        {"trace": trace, "variant": "our search, converged fit", "jcts": jcts}))
    out = tmp_path / "search.json"
    assert mod.main(["--runs", str(runs), "--out", str(out)]) == 0
    [row] = json.loads(out.read_text())["workloads"]
    assert row["tuning"] and row["jobs"] == 80
    assert row["ours"]["avg_ratio"] == pytest.approx(1.0)
    assert row["ours"]["end_within_1pct"] == row["ours"]["jct_within_1pct"] == 1.0
    assert row["published"]["end_within_1pct"] < 1.0  # the published run is another one
    assert "tuning: 80 jobs; ours 100.0% of ends" in capsys.readouterr().out
    changed = tmp_path / "changed.json"  # one change: printed, not saved
    assert mod.main(["--runs", str(runs), "--out", str(changed),
                     "-o", "speedup_base=one"]) == 0
    assert not changed.exists()
    assert "ours" in capsys.readouterr().out


def test_without_stored_runs_it_says_so_and_writes_nothing(mod, tmp_path, capsys):
    out = tmp_path / "search.json"
    assert mod.main(["--runs", str(tmp_path), "--out", str(out)]) == 2
    assert "no runs in" in capsys.readouterr().err
    assert not out.exists()


def test_every_stored_run_ended_every_job_of_its_workload(mod):
    runs = mod.stored_runs()
    assert len(runs) == 24
    artifact = mod.xc.ARTIFACTS["pollux"]
    for name, run in runs.items():
        load, workload = run["trace"].split("/")
        assert name == f"{load.removeprefix('workloads-')}-{workload}"
        assert set(run["jcts"]) == {j.job_id for j in artifact.trace(run["trace"])}
        assert run["variant"] == "our search, converged fit"


def test_the_table_of_the_doc_is_the_report_of_the_committed_json(mod):
    doc = (mod.BENCH.parent / "docs" / "reproductions" / "crosscheck.md").read_text()
    assert mod.report(json.loads(mod.OUT.read_text())["workloads"]) in doc
