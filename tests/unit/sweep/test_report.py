"""sweep report: the merged table, CSV/JSON, confidence intervals and the figures."""

from __future__ import annotations

import csv
import json
import math

import pytest

from slurm_sched.cli import main
from slurm_sched.sweep.grid import load_and_expand
from slurm_sched.sweep.report import t_interval
from slurm_sched.sweep.run_local import run_cells

GEN = """
name = "tiny-load"
seeds = [1, 2, 3]
clusters = ["16x4"]
worlds = ["sjf-bsbf"]
[[traces]]
generator = "sjf-bsbf"
jobs = [3, 5]
[[policies]]
name = "fifo"
[[policies]]
name = "sjf"
"""


def test_t_interval_matches_the_textbook():
    mean, half = t_interval([1.0, 2.0, 3.0])
    # t(0.975, 2) = 4.302653, s = 1
    assert mean == 2.0 and half == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert math.isnan(t_interval([5.0])[1])


def test_report_table_files_and_figures(write_grid, tmp_path, capsys):
    grid = write_grid(GEN)
    _, cells = load_and_expand(grid)
    out = tmp_path / "out"
    assert run_cells(cells, out).ran == 12
    (out / "failed").mkdir()
    (out / "failed" / "x.json").write_text("{}")
    plots = tmp_path / "plots"
    rc = main(["sweep", "report", str(out), "--baseline", "fifo", "--csv",
               str(tmp_path / "c.csv"), "--json", str(tmp_path / "r.json"), "--plot-dir",
               str(plots)])
    stdout, err = capsys.readouterr()
    assert rc == 0, err
    lines = stdout.splitlines()
    assert lines[0].split() == ["trace", "load", "cluster", "world", "policy", "seeds",
                                "avg_jct_s", "(h)", "+-", "95%", "CI", "speed-up", "+-",
                                "95%", "CI"]
    body = [line.split() for line in lines[2:6]]
    assert [(r[1], r[4], r[5]) for r in body] == [
        ("3", "fifo", "3"), ("3", "sjf", "3"), ("5", "fifo", "3"), ("5", "sjf", "3")]
    assert all(r[8] == "1.000" for r in body if r[4] == "fifo")  # fifo over itself
    assert "12 cell(s); 1 failed" in stdout
    with open(tmp_path / "c.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12 and {"id", "policy", "seed", "avg_jct_s", "speedup_vs_fifo"} <= set(
        rows[0])
    doc = json.loads((tmp_path / "r.json").read_text())
    assert len(doc["cells"]) == 12 and len(doc["summary"]) == 4
    one = next(s for s in doc["summary"] if s["policy"] == "sjf" and s["load"] == 5)
    seeds = [c["avg_jct_s"] for c in doc["cells"] if c["policy"] == "sjf" and c["load"] == 5]
    assert one["avg_jct_s_mean"] == pytest.approx(sum(seeds) / 3)
    assert one["avg_jct_s_ci95"] == pytest.approx(t_interval(seeds)[1])
    names = sorted(p.name for p in plots.iterdir())
    assert names == ["jct_cdf_sjf-bsbf_3_16x4_sjf-bsbf_30.0.png",
                     "jct_cdf_sjf-bsbf_5_16x4_sjf-bsbf_30.0.png",
                     "jct_vs_load_sjf-bsbf_16x4_sjf-bsbf_30.0.png",
                     "speedup_fifo_sjf-bsbf_16x4_sjf-bsbf_30.0.png"]
    assert all((plots / n).stat().st_size > 5_000 for n in names)


def test_report_errors(tmp_path, capsys):
    assert main(["sweep", "report", str(tmp_path / "none")]) == 2
    assert "no such sweep output folder" in capsys.readouterr().err
    assert main(["sweep", "report", str(tmp_path)]) == 2
    assert "no complete cell file" in capsys.readouterr().err
