"""Local runs: equality with simulate, atomic files and resume, retry once then report."""

from __future__ import annotations

import json
from pathlib import Path

from slurm_sched.cli import main
from slurm_sched.sweep import run_local
from slurm_sched.sweep.cells import SCHEMA, cell_id, failed_path, result_path, write_atomic
from slurm_sched.sweep.grid import load_and_expand
from slurm_sched.sweep.run_local import run_cells, simulate_cell
from slurm_sched.workloads import sjf_bsbf
from tests.unit.sweep.conftest import TINY

ONE = """
clusters = ["{cluster}"]
restart_overhead_s = 0
seeds = [2]
[[traces]]
{trace}
[[policies]]
name = "{policy}"
options = {options}
"""


def _simulate_json(capsys, *args: str) -> dict:
    rc = main(["simulate", "--format", "json", "--quiet", *args])
    out, err = capsys.readouterr()
    assert rc == 0, err
    (row,) = json.loads(out)
    return row


def test_a_cell_equals_simulate_bit_for_bit_on_a_file(write_grid, capsys):
    grid = write_grid(ONE.format(cluster="1x4", trace=f'file = "{TINY}"', policy="tiresias",
                                 options="{ thresholds_gpu_s = [10] }"))
    _, (cell,) = load_and_expand(grid)
    got = simulate_cell(cell)["metrics"]
    want = _simulate_json(capsys, "--trace", str(TINY), "--policy", "tiresias", "--cluster",
                          "1x4", "--restart-overhead-s", "0", "-o", "thresholds_gpu_s=[10]")
    assert got["preemptions"] > 0  # the option reached the policy
    assert {k: got[k] for k in want if k != "per_tenant"} == {
        k: v for k, v in want.items() if k != "per_tenant"}


def test_a_generated_cell_equals_simulate_on_the_written_workload(write_grid, capsys, tmp_path):
    grid = write_grid(ONE.format(cluster="16x4", trace='generator = "sjf-bsbf"\njobs = [4]',
                                 policy="sjf-bsbf", options="{}"))
    _, (cell,) = load_and_expand(grid)
    doc = simulate_cell(cell)
    assert doc["world_used"] == "sjf-bsbf"  # "auto": the policy's own world, as simulate picks
    csv = tmp_path / "w.csv"
    sjf_bsbf.write_csv(sjf_bsbf.generate(4, 2), csv)
    want = _simulate_json(capsys, "--trace", str(csv), "--policy", "sjf-bsbf", "--cluster",
                          "16x4", "--restart-overhead-s", "0")
    assert {k: doc["metrics"][k] for k in want if k != "per_tenant"} == {
        k: v for k, v in want.items() if k != "per_tenant"}
    assert len(doc["jcts_s"]) == want["jobs"] == 4


def test_files_are_atomic_and_a_rerun_skips_complete_cells(write_grid, tmp_path):
    _, cells = load_and_expand(write_grid())
    out = tmp_path / "out"
    out.mkdir()
    # a complete file written before: kept as is (its metrics are a sentinel)
    done = cells[0]
    write_atomic(result_path(out, done), {"schema": SCHEMA, "id": cell_id(done),
                                          "cell": done.to_dict(), "metrics": {"avg_jct_s": -1}})
    # a half-written temporary file and a truncated result: neither counts as done
    (out / f".{cell_id(cells[1])}.json.x1y2.tmp").write_text('{"schema": 1, "met')
    result_path(out, cells[2]).write_text('{"schema": 1, "metr')
    summary = run_cells(cells, out)
    assert (summary.skipped, summary.ran, summary.failed) == (1, len(cells) - 1, [])
    assert json.loads(result_path(out, done).read_text())["metrics"] == {"avg_jct_s": -1}
    doc = json.loads(result_path(out, cells[2]).read_text())
    assert doc["cell"] == cells[2].to_dict() and doc["runtime_s"] >= 0
    assert set(doc["metrics"]) >= {"avg_jct_s", "p99_jct_s", "makespan_s"}
    assert not list(out.glob(f".{cell_id(cells[2])}*.tmp"))  # no temporary file left behind
    again = run_cells(cells, out)
    assert (again.skipped, again.ran) == (len(cells), 0)


def test_a_crashing_cell_is_retried_once_then_reported(write_grid, tmp_path, monkeypatch,
                                                       capsys):
    grid = write_grid()
    _, cells = load_and_expand(grid)
    bad, flaky = cell_id(cells[1]), cell_id(cells[3])
    calls: dict[str, int] = {}
    real = run_local.execute

    def execute(cell, out: Path) -> float:
        cid = cell_id(cell)
        calls[cid] = calls.get(cid, 0) + 1
        if cid == bad or (cid == flaky and calls[cid] == 1):
            raise RuntimeError(f"boom {calls[cid]}")
        return real(cell, out)

    monkeypatch.setattr(run_local, "execute", execute)
    out = tmp_path / "out"
    rc = main(["sweep", "run", str(grid), "--out", str(out), "--quiet"])
    _, err = capsys.readouterr()
    assert rc == 1
    assert f"1 cell(s) failed twice, e.g. {bad}" in err
    assert calls[bad] == 2 and calls[flaky] == 2
    record = json.loads(failed_path(out, cells[1]).read_text())
    assert record["error"] == "RuntimeError: boom 2" and record["attempts"] == 2
    assert "Traceback" in record["traceback"]
    assert not result_path(out, cells[1]).exists()
    assert result_path(out, cells[3]).exists()  # the flaky one made it on its second try
    assert len(list(out.glob("*.json"))) == len(cells) - 1  # the others all ran
    # the next run retries only the failed cell, and clears its record when it succeeds
    monkeypatch.setattr(run_local, "execute", real)
    rc = main(["sweep", "run", str(grid), "--out", str(out), "--quiet"])
    assert rc == 0
    assert not failed_path(out, cells[1]).exists()
    assert len(list(out.glob("*.json"))) == len(cells)


def test_a_process_pool_run_writes_every_cell(write_grid, tmp_path, capsys):
    grid = write_grid()
    _, cells = load_and_expand(grid)
    out = tmp_path / "out"
    rc = main(["sweep", "run", str(grid), "--out", str(out), "-j", "2"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert f"{len(cells)}/{len(cells)} cells" in err  # the progress bar
    assert {p.stem for p in out.glob("*.json")} == {cell_id(c) for c in cells}
    serial = tmp_path / "serial"
    run_cells(cells, serial)
    for c in cells:  # a worker computes what the parent process computes
        a = json.loads(result_path(out, c).read_text())
        b = json.loads(result_path(serial, c).read_text())
        assert a["metrics"] == b["metrics"] and a["jcts_s"] == b["jcts_s"]
