"""``benchmarks/crosscheck.py``: the authors' outputs it reads, and its per-job agreement."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "crosscheck.py"


@pytest.fixture(scope="module")
def xc():
    spec = importlib.util.spec_from_file_location("crosscheck", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["crosscheck"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_per_job_agreement_counts_jobs_within_one_percent(xc) -> None:
    theirs = {"a": 100.0, "b": 200.0, "c": 300.0, "d": 400.0}
    ours = {"a": 100.9, "b": 198.0, "c": 330.0, "d": 400.0, "extra": 1.0}
    submit = {"a": 0.0, "b": 0.0, "c": 3000.0, "d": 0.0, "extra": 0.0}
    got = xc.compare_jobs(ours, theirs, submit)
    assert got["jobs"] == 4
    # c's JCT is 10% off, b's exactly 1% and agrees; c ends at 3,330 against 3,300: within 1%
    assert got["jct_within_1pct"] == 0.75
    assert got["end_within_1pct"] == 1.0
    assert got["worst"][0] == ["c", 330.0, 300.0]


def test_a_job_of_the_artifact_missing_here_is_an_error(xc) -> None:
    with pytest.raises(RuntimeError, match="1 of the artifact's jobs"):
        xc.compare_jobs({"a": 1.0}, {"a": 1.0, "b": 2.0}, {"a": 0.0, "b": 0.0})


def test_the_peer_averages_are_the_published_ones(xc) -> None:
    # the summaries in benchmarks/peer/README.md, recomputed from the per-job files
    pairs = {p.key: p.reference for a in xc.ARTIFACTS.values() for p in a.pairs()}
    assert pairs["muri/trace3/srtf"].avg_jct_s == pytest.approx(193081.8, abs=0.1)
    assert pairs["muri/trace1/tiresias-3q"].avg_jct_s == pytest.approx(3330371.3, abs=0.1)
    assert pairs["muri/trace3/muri-s"].avg_jct_s == pytest.approx(85502.6, abs=0.1)
    assert pairs["muri/trace3/muri-s-autopack"].avg_jct_s == pytest.approx(83242.5, abs=0.1)
    assert pairs["rubick/base/rubick"].avg_jct_s == pytest.approx(3638.29, abs=0.01)
    assert len(pairs["rubick/base/rubick"].jobs) == 406
    tiresias = pairs["pollux/workloads-1.5/workload-1/tiresias"]
    assert tiresias.avg_jct_s == pytest.approx(5520.29, abs=0.01)
    assert sum(tiresias.jobs.values()) / len(tiresias.jobs) == pytest.approx(5520.29, abs=0.01)
    # Themis on trace 3: the published average, the jobs of the artifact's code as stored
    themis = pairs["muri/trace3/themis"]
    assert themis.avg_jct_s == 397059
    assert len(themis.jobs) == 992
    assert sum(themis.jobs.values()) / 992 == pytest.approx(411777.3, abs=0.1)
    # published only: trace 3' (all submits at 0) for Themis
    assert pairs["muri/trace3_pr/themis"].jobs is None
    assert pairs["muri/trace3_pr/themis"].avg_jct_s == 1502768


def test_every_peer_job_is_a_job_of_the_bundled_trace(xc) -> None:
    for artifact in xc.ARTIFACTS.values():
        seen: dict[str, set[str]] = {}
        for pair in artifact.pairs():
            if pair.reference.jobs is None:
                continue
            if pair.trace not in seen:
                seen[pair.trace] = {j.job_id for j in artifact.trace(pair.trace)}
            assert set(pair.reference.jobs) == seen[pair.trace], pair.key


def test_primed_traces_are_the_same_jobs_submitted_at_zero(xc) -> None:
    base = xc.muri_trace("trace3")
    primed = xc.muri_trace("trace3_pr")
    assert [j.job_id for j in primed] == [j.job_id for j in base]
    assert {j.submit_time_s for j in primed} == {0.0}
    assert any(j.submit_time_s > 0 for j in base)


def test_the_bundled_primed_trace_is_the_derivation(xc) -> None:
    """trace1_pr.csv (bundled) is trace1 with every submit at 0: the rule trace3_pr and
    trace4_pr are derived by."""
    from slurm_sched.traces import bundled, read_trace

    assert xc.zero_submits(read_trace(bundled("muri/trace1.csv"))) == xc.muri_trace("trace1_pr")


def test_any_trace_in_an_artifacts_format_prints_one_object_per_policy(
        xc, tmp_path, capsys) -> None:
    """``--artifact muri --trace PATH --policies ... --format json``: what held-out traces are
    run with."""
    import json

    from slurm_sched.traces import bundled

    lines = bundled("muri/trace3.csv").read_text().splitlines()[:6]  # header and five jobs
    trace = tmp_path / "held-out.csv"
    trace.write_text("\n".join(lines) + "\n")
    assert xc.main(["--artifact", "muri", "--trace", str(trace), "--policies",
                    "srtf,muri-s-autopack", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in rows] == ["srtf", "muri-s-autopack"]
    assert all(r["jobs"] == 5 and r["avg_jct_s"] > 0 for r in rows)


def test_a_dump_runs_a_pair_the_json_already_holds(xc, tmp_path, monkeypatch) -> None:
    """Runs in the JSON are skipped, except for ``--dump``, which needs the run itself."""
    import json

    key = "muri/trace3/srtf@artifact"
    committed = json.loads((SCRIPT.parent / "results" / "crosscheck.json").read_text())
    out = tmp_path / "crosscheck.json"
    xc.save(out, {key: committed["runs"][key]})
    calls: list[Path | None] = []

    def fake_run(artifact, pair, prof, change, dump):
        calls.append(dump)
        return committed["runs"][key]

    monkeypatch.setattr(xc, "run_pair", fake_run)
    args = ["--artifacts", "muri", "--traces", "trace3", "--policies", "srtf",
            "--profiles", "artifact", "--out", str(out)]
    assert xc.main(args) == 0 and calls == []
    assert xc.main([*args, "--dump", str(tmp_path / "dump")]) == 0
    assert calls == [tmp_path / "dump" / "muri_trace3_srtf_artifact.csv"]


def test_the_tables_of_the_doc_are_the_report_of_the_committed_json(xc) -> None:
    # crosscheck.md quotes `python benchmarks/crosscheck.py --report-only`; a run that changed
    # the JSON without the doc (or the reverse) shows here
    doc = (SCRIPT.parents[1] / "docs" / "reproductions" / "crosscheck.md").read_text()
    runs = xc.load(xc.OUT)
    assert xc.summary(runs) in doc
    assert xc.report(runs) in doc
