"""The text, JSON and HTML reports of one advice."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slurm_sched.advisor import report_html, report_json, report_text
from slurm_sched.advisor.pipeline import Advice
from tests.unit.advisor.conftest import make_advice


@pytest.fixture(scope="module")
def advice() -> Advice:
    return make_advice()


def test_text_report(advice: Advice) -> None:
    text = report_text.render(advice)
    assert "Accounting: fake.sacct (parsable2): 18 jobs replayed; set aside: cancelled " \
           "before start: 2; 1 malformed record(s) skipped" in text
    assert "Cluster: 1 nodes, 4 GPUs (gpu) from --cluster 1x4" in text
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Per schedule"))
    assert lines[head + 1].split()[:4] == ["policy", "kind", "jobs", "avg"]
    assert [lines[head + 3 + k].split()[0] for k in range(4)] == \
        ["observed", "fifo", "tiresias", "sjf"]
    assert lines[head + 3].split()[1:3] == ["observed", "18"]
    assert "How closely fifo reproduces the observed starts" in text
    assert "started within 10 min of the observed time    100.0%" in text
    assert "50 resamples of the 3 days of history" in text
    assert "sjf: reads each job's true run time" in text
    assert text.rstrip().splitlines()[-1].startswith("Recommendation: stay with Slurm's own")


def test_json_schema(advice: Advice) -> None:
    data = json.loads(report_json.render(advice))
    assert data["schema"] == "slurm-sched-advise" and data["version"] == 1
    assert set(data) == {"schema", "version", "input", "cluster", "baseline", "policies",
                         "rows", "validation", "resampling", "recommendation", "notes"}
    assert set(data["input"]) == {"source", "format", "partition", "jobs", "set_aside",
                                  "warnings", "warning_messages", "first_submit_s"}
    assert set(data["cluster"]) == {"nodes", "gpus", "gpu_types", "source"}
    assert [p["name"] for p in data["policies"]] == ["fifo", "tiresias", "sjf"]
    assert set(data["policies"][0]) == {"name", "ok", "error", "clairvoyant",
                                        "rejected_jobs", "notes"}
    row = data["rows"][0]
    assert row["name"] == "observed" and row["kind"] == "observed"
    assert set(row) == {"name", "kind", "jobs", "jct_s", "queue_s", "mean_slowdown",
                        "utilisation", "span_s", "per_account", "by_size"}
    assert set(row["jct_s"]) == {"avg", "median", "p99"}
    assert set(row["by_size"]) == {"1", "2-4"}
    assert set(row["by_size"]["1"]) == {"jobs", "jct_s", "queue_s", "mean_slowdown"}
    assert set(row["per_account"]["big"]) == {"jobs", "gpu_share", "mean_slowdown"}
    assert set(data["validation"]) == {"policy", "jobs", "mean_abs_s", "median_s",
                                       "p90_abs_s", "within_share", "tolerance_s", "per_job"}
    per_job = data["validation"]["per_job"]
    assert len(per_job) == data["validation"]["jobs"]
    for d in per_job:
        assert d["difference_s"] == d["simulated_start_s"] - d["observed_start_s"]
    mean_abs = sum(abs(d["difference_s"]) for d in per_job) / len(per_job)
    assert mean_abs == pytest.approx(data["validation"]["mean_abs_s"])
    rs = data["resampling"]
    assert set(rs) == {"block", "resamples", "seed", "blocks", "jobs", "confidence",
                       "policies", "notes"}
    assert set(rs["policies"]["fifo"]) == {"avg_jct_s", "win_share", "beat_share",
                                           "improvement_median", "improvement_p5",
                                           "improvement_p95"}
    assert rs["policies"]["sjf"]["win_share"] is None
    assert set(data["recommendation"]) == {"policy", "win_share", "beat_share", "text"}


def test_html_is_self_contained(advice: Advice, tmp_path: Path) -> None:
    page = report_html.write(advice, tmp_path / "sub" / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 4 and "<path" in page
    links = re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"'\s>]*)""", page, re.IGNORECASE)
    assert links  # the SVGs' internal references
    for target in links:
        assert target.startswith("#"), target
        assert not re.match(r"(?:https?:)?//", target)
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page.lower() and "@import" not in page and "url(" not in \
        re.sub(r"url\(#[^)]*\)", "", page)
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # the four SVGs' ids do not collide
    assert "Recommendation:" in page and "How closely fifo reproduces" in page
