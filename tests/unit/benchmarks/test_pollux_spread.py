"""``benchmarks/pollux_spread.py``: every ordered pair of runs is compared with the
cross-check's measure (average ratio, ends within 1%), each against the other as reference."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def mod(load_script):
    """The script, imported for this test only."""
    return load_script("pollux_spread")


def test_pairs_compare_each_run_against_each_other(mod):
    submit = {"a": 0.0, "b": 1000.0}
    runs = {"x": {"a": 100.0, "b": 100.0}, "y": {"a": 100.5, "b": 300.0}}
    rows = {(r["run"], r["reference"]): r for r in mod.agreement(runs, submit)}
    assert set(rows) == {("x", "y"), ("y", "x")}
    # a: 0.5 s off an end at 100 s (within 1%); b: 200 s off an end at 1,100-1,300 s (not)
    assert rows["y", "x"]["end_within_1pct"] == 0.5
    assert rows["y", "x"]["avg_ratio"] == pytest.approx(400.5 / 200.0)
    assert rows["x", "y"]["avg_ratio"] == pytest.approx(200.0 / 400.5)


def test_a_run_stopped_early_counts_a_job_it_had_not_ended_only_when_that_is_clear(mod):
    submit = {"a": 0.0, "b": 0.0, "c": 0.0}
    full = {"a": 100.0, "b": 500.0, "c": 995.0}
    stopped = {"a": 100.0}  # stopped at 1,000 s: b and c still running
    rows = {(r["run"], r["reference"]): r for r in mod.agreement(
        {"full": full, "stopped": stopped}, submit, until_s=1000.0)}
    # b ended at 500 s in the full run, later than 1,000 s in the other: outside 1%;
    # c ended at 995 s, the other after 1,000 s: maybe within 1%, so not compared
    row = rows["stopped", "full"]
    assert (row["jobs_compared"], row["end_within_1pct"]) == (2, 0.5)
    assert rows["full", "stopped"]["end_within_1pct"] == 1.0
    assert row["jobs_in_both"] == 1 and row["avg_ratio"] == 1.0


def test_waits_are_seconds_from_submission_to_the_first_gpu(mod):
    waits = mod.waits({"a": 120.0, "b": None}, {"a": 100.0, "b": 5.0}, ["a", "b"])
    assert waits == {"a": 20.0, "b": None}


def test_without_stored_runs_it_says_so_and_writes_nothing(mod, tmp_path, capsys):
    out = tmp_path / "spread.json"
    assert mod.main(["--runs", str(tmp_path), "--out", str(out)]) == 2
    assert "no runs in" in capsys.readouterr().err
    assert not out.exists()


def test_stored_runs_are_read_by_name(mod, tmp_path):
    (tmp_path / "1.5-workload-2-seed1.json").write_text(
        json.dumps({"trace": "workloads-1.5/workload-2", "seed": 1, "until_s": None, "jcts": {},
                    "first_gpu_s": {}})
    )
    assert list(mod.artifact_runs(tmp_path)) == ["1.5-workload-2-seed1"]


def test_a_run_with_one_change_is_labelled_with_it(mod):
    assert mod.run_label({"seed": 1}) == "seed 1"
    assert mod.run_label({"seed": 1, "variant": "converged fit"}) == "seed 1, converged fit"
